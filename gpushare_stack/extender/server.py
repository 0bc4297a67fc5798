"""HTTP server speaking k8s.io/kube-scheduler/extender/v1 (Go field names, no tags).

POST {prefix}/filter      ExtenderArgs -> ExtenderFilterResult
POST {prefix}/prioritize  ExtenderArgs -> HostPriorityList
POST {prefix}/bind        ExtenderBindingArgs -> ExtenderBindingResult
GET  {prefix}/inspect[/<node>] (trusted clients only), GET /healthz

Only the scheduler may call the verbs. With ``tls`` (the deployed extender), the
server speaks HTTPS and a POST is served only on a connection whose client sent a
certificate the extender's client CA signed (``gpushare_stack.extender.tls``): mutual
TLS with kube-scheduler. Whatever the transport, a POST from an address outside
``trusted_clients`` (default loopback, where the scheduler's extender configuration
points) is answered 403 too, so a pod cannot bind pods by calling ``/bind`` itself. A
request is bounded: its body (``MAX_BODY_BYTES``, a Content-Length required), the time
a connection may sit idle or half-sent (``IDLE_TIMEOUT_S``), and the connections served
at once (``MAX_CONNECTIONS``, more are answered 503); anything malformed is answered
400 naming what is wrong, never a dropped connection.

A scheduler without nodeCacheCapable sends every candidate Node object (a NodeList of
megabytes) with each filter and expects the kept ones back. The server reads such a
request with msgspec: one pass keeps each node as its raw JSON (msgspec.Raw, a view
of the request body), a second reads only a node's name, card annotation and
capacity (and only for a node whose exact JSON it has not read before); the reply
writes the kept nodes' raw JSON back unchanged. No node object is built as Python
dicts or serialised again.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import ssl
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import msgspec
from msgspec import UNSET, UnsetType

from gpushare_stack import contract
from gpushare_stack.extender.nodes import MISSING, NodeSource, card_source
from gpushare_stack.extender.state import ClusterState
from gpushare_stack.extender.tls import has_verified_client_certificate

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 << 20  # a NodeList of 1,000 nodes is a few MB
IDLE_TIMEOUT_S = 30.0  # a connection idle, or a request half-sent, this long is closed
MAX_CONNECTIONS = 256
LISTEN_BACKLOG = 256
LOOPBACK = ("127.0.0.0/8", "::1/128")
TLS_HANDSHAKE_RECORD = b"\x16"  # the first byte a TLS client sends
_PLAIN_HTTP_BODY = b'{"Error": "gpushare: this port speaks HTTPS with client certificates (mutual TLS), not HTTP"}'
PLAIN_HTTP_ANSWER = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\n"
    + f"Content-Length: {len(_PLAIN_HTTP_BODY)}\r\n\r\n".encode()
    + _PLAIN_HTTP_BODY
)


class BindBackend(Protocol):
    def bind(self, namespace: str, name: str, uid: str, node: str) -> Any: ...


class WireError(ValueError):
    """A request body that does not follow the extender wire types."""


def _field(body: dict[str, Any], name: str, kind: type, where: str) -> Any:
    value = body.get(name)
    if not isinstance(value, kind):
        raise WireError(f"gpushare: {where}.{name} must be a {kind.__name__}, got {value!r}")
    return value


# ---- reading ExtenderArgs ---------------------------------------------------------
# One pass over the body splits the NodeList into each node's raw JSON; a second,
# per node not seen before, reads the few fields the filter needs and skips the rest. Decoders are
# built once; msgspec holds the GIL for a whole decode or encode, so the server's
# threads share them. The structs are not tracked by the garbage collector (gc=False:
# they hold no cycles), so a request of a thousand nodes adds no collector work.


class _NodeList(msgspec.Struct, gc=False):
    """v1.NodeList with each field and each node kept raw (absent fields stay absent)."""

    kind: msgspec.Raw | UnsetType = UNSET
    apiVersion: msgspec.Raw | UnsetType = UNSET  # noqa: N815 (wire name)
    metadata: msgspec.Raw | UnsetType = UNSET
    items: list[msgspec.Raw] | None = None


class _Args(msgspec.Struct, gc=False):
    Pod: Any = None
    Nodes: _NodeList | None = None
    NodeNames: Any = None


class _Annotations(msgspec.Struct, gc=False):
    cards: str | UnsetType = msgspec.field(default=UNSET, name=contract.NODE_CARDS_ANNOTATION)


class _Capacity(msgspec.Struct, gc=False):
    mem: Any = msgspec.field(default=UNSET, name=contract.RESOURCE_MEM)
    count: Any = msgspec.field(default=UNSET, name=contract.RESOURCE_COUNT)


class _NodeMeta(msgspec.Struct, gc=False):
    name: str = ""
    annotations: _Annotations | None = None


class _NodeStatus(msgspec.Struct, gc=False):
    capacity: _Capacity | None = None


class _NodeView(msgspec.Struct, gc=False):
    """The parts of a v1.Node the filter reads; every other field is skipped."""

    metadata: _NodeMeta | None = None
    status: _NodeStatus | None = None


_ARGS = msgspec.json.Decoder(_Args)
_NODE = msgspec.json.Decoder(_NodeView)
_ANY = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder()

# What each node object read as, by its exact JSON: between two scheduling cycles
# most nodes are sent byte for byte as before, and a lookup costs a copy and a hash
# of the bytes instead of a decode. A changed node (any field) is new bytes, read
# afresh. Shared by the server's threads: a lost race only decodes twice.
_SOURCES: dict[bytes, NodeSource] = {}
_SOURCES_SLACK = 1024  # kept beyond four entries per node of the latest request


def _node_sources(raw_nodes: list[msgspec.Raw]) -> list[NodeSource]:
    if len(_SOURCES) > 4 * len(raw_nodes) + _SOURCES_SLACK:
        _SOURCES.clear()  # old versions of nodes; start over
    sources = []
    for raw in raw_nodes:
        key = bytes(raw)
        ref = _SOURCES.get(key)
        if ref is None:
            ref = _SOURCES[key] = _node_source(_NODE.decode(key))
        sources.append(ref)
    return sources


def _node_source(view: _NodeView) -> NodeSource:
    meta, status = view.metadata, view.status
    if meta is None:
        name, annotation = "", None
    else:
        name = meta.name
        annotation = meta.annotations.cards if meta.annotations is not None else UNSET
        annotation = None if annotation is UNSET else annotation
    if annotation is None and status is not None and status.capacity is not None:
        capacity = status.capacity
        return NodeSource(
            name,
            card_source(
                None,
                MISSING if capacity.mem is UNSET else capacity.mem,
                MISSING if capacity.count is UNSET else capacity.count,
            ),
        )
    return NodeSource(name, card_source(annotation))


@dataclass
class ExtenderArgs:
    """A decoded ExtenderArgs: the pod, and either the node names or the node objects
    (each kept as its raw JSON beside what the filter reads of it)."""

    pod: dict[str, Any]
    names: list[Any] | None = None  # NodeNames (nodeCacheCapable)
    node_list: _NodeList | None = None  # Nodes, raw
    sources: list[NodeSource] | None = None  # one per raw node

    @property
    def node_names(self) -> list[Any]:
        if self.names is not None:
            return self.names
        return [ref.name for ref in self.sources or ()]


def _flavor_node_sources(raw_nodes: list[msgspec.Raw], flavor: Any) -> list[NodeSource]:
    """Node sources read by a peer flavor's own node reader (gpushare_stack/peers)."""
    sources = []
    for raw in raw_nodes:
        node = _ANY.decode(bytes(raw))
        if not isinstance(node, dict):
            raise WireError(f"gpushare: ExtenderArgs.Nodes holds a node that is not a v1.Node: {node!r}")
        sources.append(flavor.node_source(node))
    return sources


def decode_extender_args(body: bytes, flavor: Any = None) -> ExtenderArgs:
    """Read ExtenderArgs; WireError names what does not follow the wire types.
    ``flavor``: the extender's flavor, when it reads node objects its own way."""
    try:
        args = _ARGS.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError(f"gpushare: bad request body: {exc}") from None
    pod = args.Pod
    if not isinstance(pod, dict):
        raise WireError(f"gpushare: ExtenderArgs.Pod must be a dict, got {pod!r}")
    if args.NodeNames is not None:
        if not isinstance(args.NodeNames, list):
            raise WireError(f"gpushare: ExtenderArgs.NodeNames must be a list, got {args.NodeNames!r}")
        return ExtenderArgs(pod, names=args.NodeNames)
    if args.Nodes is None:
        raise WireError("gpushare: ExtenderArgs.Nodes must be a dict, got None")
    try:
        if flavor is None or flavor.fast_node_view:
            sources = _node_sources(args.Nodes.items or [])
        else:
            sources = _flavor_node_sources(args.Nodes.items or [], flavor)
    except msgspec.DecodeError as exc:
        raise WireError(f"gpushare: ExtenderArgs.Nodes holds a node that is not a v1.Node: {exc}") from None
    return ExtenderArgs(pod, node_list=args.Nodes, sources=sources)


def filter_result(state: ClusterState, args: ExtenderArgs) -> dict[str, Any]:
    """ExtenderFilterResult for ExtenderArgs (NodeNames when nodeCacheCapable, else Nodes)."""
    if args.names is not None:
        outcome = state.filter(args.pod, args.names)
        return {
            "Nodes": None,
            "NodeNames": outcome.fits,
            "FailedNodes": outcome.failed,
            "FailedAndUnresolvableNodes": outcome.unresolvable,
            "Error": "",
        }
    node_list, sources = args.node_list or _NodeList(), args.sources or []
    outcome = state.filter(args.pod, sources)
    keep = set(outcome.fits)
    # The kept nodes go back as the scheduler sent them: their raw JSON, in its order.
    kept = [raw for raw, ref in zip(node_list.items or (), sources, strict=True) if ref.name in keep]
    return {
        "Nodes": msgspec.structs.replace(node_list, items=kept),
        "NodeNames": None,
        "FailedNodes": outcome.failed,
        "FailedAndUnresolvableNodes": outcome.unresolvable,
        "Error": "",
    }


def prioritize_result(state: ClusterState, args: ExtenderArgs) -> list[dict[str, Any]]:
    return [{"Host": host, "Score": score} for host, score in state.prioritize(args.pod, args.node_names)]


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


def _decode_object(body: bytes) -> dict[str, Any]:
    try:
        args = _ANY.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError(f"gpushare: bad request body: {exc}") from None
    if not isinstance(args, dict):
        raise WireError(f"gpushare: bad request body: request body must be a JSON object, got {type(args).__name__}")
    return args


class ExtenderServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        state: ClusterState,
        binder: BindBackend | None,
        prefix: str = contract.EXTENDER_PREFIX,
        trusted_clients: Sequence[str] = LOOPBACK,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.state = state
        self.tls = tls
        self.binder = binder
        self.prefix = prefix.rstrip("/")
        self.trusted = [ipaddress.ip_network(c, strict=False) for c in trusted_clients]
        self._slots = threading.BoundedSemaphore(max_connections)
        self.idle_timeout_s = idle_timeout_s
        super().__init__(address, _Handler)

    def trusts(self, host: str) -> bool:
        try:
            addr = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return False
        if getattr(addr, "ipv4_mapped", None):
            addr = addr.ipv4_mapped
        return any(addr in net for net in self.trusted)

    def process_request(self, request: Any, client_address: Any) -> None:
        """One thread per connection, at most ``max_connections`` at once; the next is
        answered 503 and closed at once (no thread, no read)."""
        if not self._slots.acquire(blocking=False):
            try:
                request.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    b'Content-Length: 49\r\n\r\n{"Error": "gpushare: too many connections, retry"}'
                )
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Serve one connection; with ``tls``, the handshake comes first, in this
        connection's own thread and bounded by the idle timeout, so a client that
        never finishes it holds one slot for at most that long, never the accept loop."""
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(self.idle_timeout_s)
        try:
            first = request.recv(1, socket.MSG_PEEK)
        except OSError:
            return
        if first and first != TLS_HANDSHAKE_RECORD:
            # Plain HTTP on the TLS port: say so, as a 400, instead of a reset.
            try:
                request.sendall(PLAIN_HTTP_ANSWER)
            except OSError:
                pass
            return
        try:
            wrapped = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            log.warning("TLS handshake with %s failed: %s", client_address[0], exc)
            return
        try:
            super().finish_request(wrapped, client_address)
        finally:
            try:
                wrapped.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            wrapped.close()


class _Handler(BaseHTTPRequestHandler):
    server: ExtenderServer
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_S  # per socket read: an idle or half-sent request is dropped

    def setup(self) -> None:
        self.timeout = self.server.idle_timeout_s
        super().setup()

    disable_nagle_algorithm = True  # headers and body are separate writes: avoid 40 ms delayed-ACK stalls

    def log_message(self, fmt: str, *args: Any) -> None:
        log.debug("%s " + fmt, self.address_string(), *args)

    def _send(self, status: int, body: Any) -> None:
        data = _ENCODER.encode(body)
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
        elif path.startswith(f"{prefix}/inspect") and not getattr(self.server.state.flavor, "serves_inspect", True):
            self._send(404, {"error": f"gpushare: no such path {self.path!r}"})
        elif path.startswith(f"{prefix}/inspect") and not self.server.trusts(self.client_address[0]):
            # Which pods hold which cards is every tenant's business but not every pod's.
            self._send(
                403, {"error": f"gpushare: inspect is served to trusted clients only, not {self.client_address[0]}"}
            )
        elif path == f"{prefix}/inspect":
            self._send(200, self.server.state.inspect())
        elif path.startswith(f"{prefix}/inspect/"):
            node = path[len(prefix) + len("/inspect/") :]
            try:
                self._send(200, self.server.state.inspect(node))
            except KeyError:
                self._send(404, {"error": f"gpushare: node {node!r} is not in the extender's cache"})
        else:
            self._send(404, {"error": f"gpushare: no such path {self.path!r}"})

    def _body(self) -> bytes | None:
        """The request body, or None once an error answer was sent."""
        if self.headers.get("Transfer-Encoding"):
            self._send(411, {"Error": "gpushare: send the body with a Content-Length, not Transfer-Encoding"})
            self.close_connection = True
            return None
        text = self.headers.get("Content-Length")
        if text is None:
            self._send(411, {"Error": "gpushare: Content-Length is required"})
            self.close_connection = True
            return None
        if not text.strip().isdigit():
            self._send(400, {"Error": f"gpushare: Content-Length {text!r} is not a byte count"})
            self.close_connection = True
            return None
        length = int(text)
        if length > MAX_BODY_BYTES:
            self._send(413, {"Error": f"gpushare: body of {length} bytes is over the {MAX_BODY_BYTES}-byte limit"})
            self.close_connection = True
            return None
        raw = self.rfile.read(length)
        if len(raw) < length:
            self.close_connection = True  # the peer went away mid-body: nothing to answer
            return None
        return raw

    def _refusal(self) -> tuple[str, str] | None:
        """Why this connection may not call the verbs (the answer, the log's reason), or None."""
        if not self.server.trusts(self.client_address[0]):
            return f"gpushare: {self.client_address[0]} may not call the scheduler's verbs", "not a trusted client"
        if self.server.tls is not None and not has_verified_client_certificate(self.connection):
            return (
                "gpushare: only kube-scheduler may call the verbs: present a client certificate "
                "that the extender's client CA signed",
                "no client certificate",
            )
        return None

    def do_POST(self) -> None:  # noqa: N802
        prefix = self.server.prefix
        verb = self.path.split("?", 1)[0].rstrip("/")
        refusal = self._refusal()
        if refusal is not None:
            error, reason = refusal
            self._send(403, {"Error": error})
            self.close_connection = True
            log.warning("refused POST %s from %s (%s)", verb, self.client_address[0], reason)
            return
        raw = self._body()
        if raw is None:
            return
        flavor = self.server.state.flavor

        def read_args(body: bytes) -> ExtenderArgs:
            return decode_extender_args(body, flavor)

        handlers = {
            f"{prefix}/filter": (read_args, lambda a: filter_result(self.server.state, a)),
            f"{prefix}/prioritize": (read_args, lambda a: prioritize_result(self.server.state, a)),
            f"{prefix}/bind": (_decode_object, lambda a: bind_result(self.server.binder, a)),
        }
        decode, handler = handlers.get(verb, (None, None))
        if decode is None or handler is None:
            self._send(404, {"Error": f"gpushare: no such verb {self.path!r}"})
            return
        try:
            args = decode(raw)
        except WireError as exc:
            self._send(400, {"Error": str(exc)})
            return
        except (RecursionError, MemoryError, ValueError, TypeError) as exc:
            self._send(400, {"Error": f"gpushare: bad request body: {type(exc).__name__}: {str(exc)[:200]}"})
            return
        if not self.server.state.synced.is_set() and not verb.endswith("/prioritize"):
            # Before the cache holds every pod's annotations a bind could double-book.
            self._send(200, {"Error": "gpushare: extender cache not synced yet"})
            return
        try:
            self._send(200, handler(args))
        except WireError as exc:
            self._send(400, {"Error": str(exc)})
        except (KeyError, TypeError, AttributeError, ValueError, RecursionError) as exc:
            # A well-formed JSON body of the wrong shape (a pod without metadata, ...).
            log.warning("%s: malformed request: %r", verb, exc)
            self._send(400, {"Error": f"gpushare: malformed {verb.rsplit('/', 1)[-1]} request: {exc!r}"[:500]})
        except Exception as exc:
            log.exception("%s failed", verb)
            self._send(500, {"Error": f"gpushare: {verb.rsplit('/', 1)[-1]} failed: {exc!r}"[:500]})
