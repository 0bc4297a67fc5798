"""HTTP server speaking k8s.io/kube-scheduler/extender/v1 (Go field names, no tags).

POST {prefix}/filter      ExtenderArgs -> ExtenderFilterResult
POST {prefix}/prioritize  ExtenderArgs -> HostPriorityList
POST {prefix}/bind        ExtenderBindingArgs -> ExtenderBindingResult
GET  {prefix}/inspect[/<node>], GET /healthz
"""

from __future__ import annotations

import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from gpushare_stack import contract
from gpushare_stack.extender.state import ClusterState

log = logging.getLogger(__name__)


class BindBackend(Protocol):
    def bind(self, namespace: str, name: str, uid: str, node: str) -> Any: ...


class WireError(ValueError):
    """A request body that does not follow the extender wire types."""


def _field(body: dict[str, Any], name: str, kind: type, where: str) -> Any:
    value = body.get(name)
    if not isinstance(value, kind):
        raise WireError(f"gpushare: {where}.{name} must be a {kind.__name__}, got {value!r}")
    return value


def filter_result(state: ClusterState, args: dict[str, Any]) -> dict[str, Any]:
    """ExtenderFilterResult for ExtenderArgs (NodeNames when nodeCacheCapable, else Nodes)."""
    pod = _field(args, "Pod", dict, "ExtenderArgs")
    if args.get("NodeNames") is not None:
        names = _field(args, "NodeNames", list, "ExtenderArgs")
        outcome = state.filter(pod, names)
        return {"Nodes": None, "NodeNames": outcome.fits, "FailedNodes": outcome.failed,
                "FailedAndUnresolvableNodes": outcome.unresolvable, "Error": ""}
    nodes = _field(args, "Nodes", dict, "ExtenderArgs")
    items = nodes.get("items") or []
    outcome = state.filter(pod, items)
    keep = set(outcome.fits)
    kept = [n for n in items if n.get("metadata", {}).get("name") in keep]
    return {"Nodes": {**nodes, "items": kept}, "NodeNames": None, "FailedNodes": outcome.failed,
            "FailedAndUnresolvableNodes": outcome.unresolvable, "Error": ""}


def prioritize_result(state: ClusterState, args: dict[str, Any]) -> list[dict[str, Any]]:
    pod = _field(args, "Pod", dict, "ExtenderArgs")
    if args.get("NodeNames") is not None:
        names = _field(args, "NodeNames", list, "ExtenderArgs")
    else:
        nodes = _field(args, "Nodes", dict, "ExtenderArgs")
        names = [n.get("metadata", {}).get("name") for n in nodes.get("items") or []]
    return [{"Host": host, "Score": score} for host, score in state.prioritize(pod, names)]


def bind_result(backend: BindBackend | None, args: dict[str, Any]) -> dict[str, str]:
    where = "ExtenderBindingArgs"
    name = _field(args, "PodName", str, where)
    namespace = _field(args, "PodNamespace", str, where)
    uid = _field(args, "PodUID", str, where)
    node = _field(args, "Node", str, where)
    if backend is None:
        return {"Error": "gpushare: this extender runs without an API client and cannot bind"}
    try:
        backend.bind(namespace, name, uid, node)
    except Exception as exc:  # the scheduler shows Error on the pod and retries
        log.warning("bind %s/%s to %s failed: %s", namespace, name, node, exc)
        return {"Error": str(exc)}
    return {"Error": ""}


class ExtenderServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], state: ClusterState,
                 binder: BindBackend | None, prefix: str = contract.EXTENDER_PREFIX) -> None:
        self.state = state
        self.binder = binder
        self.prefix = prefix.rstrip("/")
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: ExtenderServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: avoid 40 ms delayed-ACK stalls

    def log_message(self, fmt: str, *args: Any) -> None:
        log.debug("%s " + fmt, self.address_string(), *args)

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        prefix = self.server.prefix
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/healthz":
            synced = self.server.state.synced.is_set()
            self._send(200 if synced else 503, {"synced": synced})
        elif path == f"{prefix}/inspect":
            self._send(200, self.server.state.inspect())
        elif path.startswith(f"{prefix}/inspect/"):
            node = path[len(prefix) + len("/inspect/"):]
            try:
                self._send(200, self.server.state.inspect(node))
            except KeyError:
                self._send(404, {"error": f"gpushare: node {node!r} is not in the extender's cache"})
        else:
            self._send(404, {"error": f"gpushare: no such path {self.path!r}"})

    def do_POST(self) -> None:  # noqa: N802
        prefix = self.server.prefix
        verb = self.path.split("?", 1)[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        handlers = {
            f"{prefix}/filter": lambda a: filter_result(self.server.state, a),
            f"{prefix}/prioritize": lambda a: prioritize_result(self.server.state, a),
            f"{prefix}/bind": lambda a: bind_result(self.server.binder, a),
        }
        handler = handlers.get(verb)
        if handler is None:
            self._send(404, {"Error": f"gpushare: no such verb {self.path!r}"})
            return
        try:
            args = json.loads(raw)
            if not isinstance(args, dict):
                raise WireError(f"gpushare: request body must be a JSON object, got {type(args).__name__}")
        except (json.JSONDecodeError, WireError) as exc:
            self._send(400, {"Error": f"gpushare: bad request body: {exc}"})
            return
        if not self.server.state.synced.is_set() and not verb.endswith("/prioritize"):
            # Before the cache holds every pod's annotations a bind could double-book.
            self._send(200, {"Error": "gpushare: extender cache not synced yet"})
            return
        try:
            self._send(200, handler(args))
        except WireError as exc:
            self._send(400, {"Error": str(exc)})
