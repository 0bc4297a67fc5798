"""The extender over HTTP: an ASGI application served by Hypercorn.

POST {prefix}/filter      ExtenderArgs -> ExtenderFilterResult
POST {prefix}/prioritize  ExtenderArgs -> HostPriorityList
POST {prefix}/bind        ExtenderBindingArgs -> ExtenderBindingResult
GET  {prefix}/inspect[/<node>] (trusted clients only), GET /healthz

Only the scheduler may call the verbs. With ``tls`` (the deployed extender) the port
speaks HTTPS and the handshake requires a client certificate the extender's client CA
signed (``gpushare_stack.extender.tls``): mutual TLS with kube-scheduler, and any other
client fails the handshake before a byte of HTTP is read (it reads EOF: asyncio does
not flush the alert). The kubelet's probes, which send no certificate, read
``/healthz`` on a second, plain listener (``health_address``), which serves that and
the view (``inspect``, to trusted clients only, as on the main port) and nothing else.
Whatever the transport, a POST from an address outside ``trusted_clients`` (default
loopback, where the scheduler's extender configuration points) is answered 403, so a
pod cannot bind pods by calling ``/bind``.

A client cannot hold the extender: Hypercorn's event loop costs a connection memory,
not a thread; the connections open at once are bounded (``limit_connections``: the
loop stops accepting at the process's file limit and the rest wait in the backlog),
and every phase has a deadline (``deadline_s``): the TLS handshake, the request head
from the connection's start (or the previous answer; a head dribbled a byte at a time
is cut off all the same), the body from the head, and the answer's sending (a client
that does not read it is reset). A head is at most ``MAX_HEAD_BYTES`` and
``MAX_HEADERS`` fields (431 past either), a body ``MAX_BODY_BYTES`` with a
Content-Length (413, 411), HTTP/2 is answered 505, and a refused client's body is
never read. A body the verbs cannot read is answered 400 naming what is wrong (a head
the HTTP parser cannot read gets the parser's own 400, without a body). The wire types
are ``gpushare_stack.extender.wire``; the decisions run in worker threads, so a long
decode never stalls the connections the loop serves.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import resource
import socket
import ssl
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from hypercorn.asyncio import serve
from hypercorn.config import Config

from gpushare_stack import contract
from gpushare_stack.extender import wire
from gpushare_stack.extender.state import ClusterState

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 << 20  # a NodeList of 1,000 nodes is a few MB
MAX_HEAD_BYTES = 16 << 10  # request line and headers; a scheduler sends a few hundred bytes
MAX_HEADERS = 64
DEADLINE_S = 10.0  # for a handshake, a request head, a body; and a connection idle this long is closed
LISTEN_BACKLOG = 1024
MAX_CONNECTIONS = 1024  # x 320 KiB for a TLS handshake in progress: well under the Deployment's 1 GiB
SPARE_FILES = 64  # descriptors beyond the connections: the listeners, the API client, libraries
LOOPBACK = ("127.0.0.0/8", "::1/128")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class _Answer(Exception):
    """An answer decided before the verb runs (a refusal, a bad body)."""

    def __init__(self, status: int, body: Any, close: bool = False) -> None:
        super().__init__(status)
        self.status, self.body, self.close = status, body, close


class ExtenderApp:
    """The ASGI application: routing, refusals and the body's deadline; the verbs
    themselves (``wire``) run in worker threads."""

    def __init__(
        self,
        state: ClusterState,
        binder: wire.BindBackend | None,
        prefix: str,
        trusted_clients: Sequence[str],
        deadline_s: float,
        health_port: int | None,
    ) -> None:
        self.state = state
        self.binder = binder
        self.prefix = prefix.rstrip("/")
        self.trusted = [ipaddress.ip_network(c, strict=False) for c in trusted_clients]
        self.deadline_s = deadline_s
        self.health_port = health_port

    def trusts(self, host: str) -> bool:
        try:
            addr = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return False
        if getattr(addr, "ipv4_mapped", None):
            addr = addr.ipv4_mapped
        return any(addr in net for net in self.trusted)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        try:
            status, body = await self._answer(scope, receive)
            close = False
        except _Answer as answer:
            status, body, close = answer.status, answer.body, answer.close
        data = wire.encode(body)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        if close:
            headers.append((b"connection", b"close"))
        try:
            # A client that does not read its answer holds it no longer than the deadline:
            # the answer left unfinished, the connection is closed.
            async with asyncio.timeout(self.deadline_s):
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": data})
        except TimeoutError:
            log.info("%s did not read its answer in %g s; connection closed", scope.get("client"), self.deadline_s)

    async def _answer(self, scope: Scope, receive: Receive) -> tuple[int, Any]:
        path = scope["path"].rstrip("/")
        client = (scope.get("client") or ("", 0))[0]
        if scope.get("http_version") not in ("1.0", "1.1"):
            # HTTP/2 (prior knowledge on a plain port): streams would multiply what one
            # connection can hold; kube-scheduler speaks HTTP/1.1 here.
            raise _Answer(505, {"Error": "gpushare: HTTP/1.1 only"}, close=True)
        if len(scope["headers"]) > MAX_HEADERS:
            raise _Answer(431, {"Error": f"gpushare: more than {MAX_HEADERS} header fields"}, close=True)
        on_health_port = self.health_port is not None and (scope.get("server") or ("", 0))[1] == self.health_port
        if path == "/healthz":
            synced = self.state.synced.is_set()
            return (200 if synced else 503), {"synced": synced}
        if on_health_port and not (scope["method"] == "GET" and path.startswith(f"{self.prefix}/inspect")):
            # The plain listener: the probes' /healthz, and the view for trusted clients
            # (the node's own processes), nothing else.
            raise _Answer(
                404, {"error": f"gpushare: this port serves /healthz and inspect only, not {scope['path']!r}"}
            )
        if scope["method"] == "GET":
            return self._get(path, client)
        if scope["method"] != "POST":
            raise _Answer(405, {"Error": f"gpushare: method {scope['method']} is not served"}, close=True)
        if not self.trusts(client):
            log.warning("refused POST %s from %s (not a trusted client)", path, client)
            raise _Answer(403, {"Error": f"gpushare: {client} may not call the scheduler's verbs"}, close=True)
        handlers: dict[str, Callable[[bytes], Any]] = {
            f"{self.prefix}/filter": self._filter,
            f"{self.prefix}/prioritize": self._prioritize,
            f"{self.prefix}/bind": self._bind,
        }
        handler = handlers.get(path)
        if handler is None:
            raise _Answer(404, {"Error": f"gpushare: no such verb {scope['path']!r}"})
        raw = await self._body(scope, receive)
        if not self.state.synced.is_set() and not path.endswith("/prioritize"):
            # Before the cache holds every pod's annotations a bind could double-book.
            return 200, {"Error": "gpushare: extender cache not synced yet"}
        return await asyncio.to_thread(self._run, path, handler, raw)

    def _get(self, path: str, client: str) -> tuple[int, Any]:
        prefix = self.prefix
        inspect = f"{prefix}/inspect"
        if path.startswith(inspect) and not getattr(self.state.flavor, "serves_inspect", True):
            raise _Answer(404, {"error": f"gpushare: no such path {path!r}"})
        if path.startswith(inspect) and not self.trusts(client):
            # Which pods hold which cards is every tenant's business but not every pod's.
            raise _Answer(403, {"error": f"gpushare: inspect is served to trusted clients only, not {client}"})
        if path == inspect:
            return 200, self.state.inspect()
        if path.startswith(f"{inspect}/"):
            node = path[len(inspect) + 1 :]
            try:
                return 200, self.state.inspect(node)
            except KeyError:
                raise _Answer(404, {"error": f"gpushare: node {node!r} is not in the extender's cache"}) from None
        raise _Answer(404, {"error": f"gpushare: no such path {path!r}"})

    async def _body(self, scope: Scope, receive: Receive) -> bytes:
        """The request body, read within the deadline; a missing or oversized length is
        answered before a byte of it is read."""
        headers = {name.lower(): value for name, value in scope["headers"]}
        if b"transfer-encoding" in headers:
            raise _Answer(
                411, {"Error": "gpushare: send the body with a Content-Length, not Transfer-Encoding"}, close=True
            )
        text = headers.get(b"content-length")
        if text is None:
            raise _Answer(411, {"Error": "gpushare: Content-Length is required"}, close=True)
        length = int(text)  # the HTTP parser has checked it is a number
        if length > MAX_BODY_BYTES:
            raise _Answer(
                413, {"Error": f"gpushare: body of {length} bytes is over the {MAX_BODY_BYTES}-byte limit"}, close=True
            )
        chunks: list[bytes] = []
        try:
            async with asyncio.timeout_at(asyncio.get_running_loop().time() + self.deadline_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _Answer(400, {"Error": "gpushare: the client went away mid-body"}, close=True)
                    chunks.append(message.get("body", b""))
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            got = sum(map(len, chunks))
            raise _Answer(
                408,
                {"Error": f"gpushare: {got} of {length} body bytes came in {self.deadline_s:g} s; send it faster"},
                close=True,
            ) from None
        return b"".join(chunks)

    def _run(self, path: str, handler: Callable[[bytes], Any], raw: bytes) -> tuple[int, Any]:
        verb = path.rsplit("/", 1)[-1]
        try:
            return 200, handler(raw)
        except wire.WireError as exc:
            return 400, {"Error": str(exc)}
        except (RecursionError, MemoryError) as exc:
            return 400, {"Error": f"gpushare: bad request body: {type(exc).__name__}: {str(exc)[:200]}"}
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            # A well-formed JSON body of the wrong shape (a pod without metadata, ...).
            log.warning("%s: malformed request: %r", path, exc)
            return 400, {"Error": f"gpushare: malformed {verb} request: {exc!r}"[:500]}
        except Exception as exc:
            log.exception("%s failed", path)
            return 500, {"Error": f"gpushare: {verb} failed: {exc!r}"[:500]}

    def _args(self, raw: bytes) -> wire.ExtenderArgs:
        try:
            return wire.decode_extender_args(raw, self.state.flavor)
        except (RecursionError, MemoryError, ValueError, TypeError) as exc:
            if isinstance(exc, wire.WireError):
                raise
            raise wire.WireError(f"gpushare: bad request body: {type(exc).__name__}: {str(exc)[:200]}") from None

    def _filter(self, raw: bytes) -> Any:
        return wire.filter_result(self.state, self._args(raw))

    def _prioritize(self, raw: bytes) -> Any:
        return wire.prioritize_result(self.state, self._args(raw))

    def _bind(self, raw: bytes) -> Any:
        return wire.bind_result(self.binder, wire.decode_object(raw))


class _Config(Config):
    """Hypercorn's configuration with the extender's own TLS context (client
    certificates required), rather than one it builds from file names."""

    def __init__(self, tls: ssl.SSLContext | None) -> None:
        super().__init__()
        self._tls = tls

    @property
    def ssl_enabled(self) -> bool:
        return self._tls is not None

    def create_ssl_context(self) -> ssl.SSLContext | None:
        return self._tls


def limit_connections(connections: int) -> None:
    """Bound the connections open at once, so their memory is bounded: the process's
    file limit becomes ``connections`` plus a few spare. At the limit the event loop
    pauses accepting (a second at a time) and new clients wait in the listen backlog,
    while the ones it holds are cut off at their deadlines."""
    wanted = connections + SPARE_FILES
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and wanted > hard:
        raise ValueError(f"{wanted} files are over the process's hard limit of {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _listen(address: tuple[str, int], deadline_s: float) -> socket.socket:
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Inherited by every accepted connection: data the peer leaves unacknowledged (a
    # client that never reads, so its window stays shut) for this long resets it in the
    # kernel, where closing it would wait for the buffered answer to drain.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(deadline_s * 1000))
    sock.bind(address)
    sock.listen(LISTEN_BACKLOG)
    return sock


class ExtenderServer:
    """The listening sockets (bound at construction, so port 0 is known at once) and
    the Hypercorn loop that serves them; ``serve_forever`` blocks until ``shutdown``."""

    def __init__(
        self,
        address: tuple[str, int],
        state: ClusterState,
        binder: wire.BindBackend | None,
        prefix: str = contract.EXTENDER_PREFIX,
        trusted_clients: Sequence[str] = LOOPBACK,
        deadline_s: float = DEADLINE_S,
        tls: ssl.SSLContext | None = None,
        health_address: tuple[str, int] | None = None,
    ) -> None:
        self.state = state
        self.binder = binder
        self.socket = _listen(address, deadline_s)
        self.server_address = self.socket.getsockname()
        self.health_socket = _listen(health_address, deadline_s) if health_address else None
        self.health_address = self.health_socket.getsockname() if self.health_socket else None
        self.app = ExtenderApp(
            state,
            binder,
            prefix,
            trusted_clients,
            deadline_s,
            self.health_address[1] if self.health_address else None,
        )
        if tls is not None:
            tls.set_alpn_protocols(["http/1.1"])  # one parser with the limits above, not HTTP/2's
        config = _Config(tls)
        # Hypercorn serves what it is handed: duplicates of the bound sockets' descriptors.
        config.bind = [f"fd://{os.dup(self.socket.fileno())}"]
        if self.health_socket is not None:
            config.insecure_bind = [f"fd://{os.dup(self.health_socket.fileno())}"]
        config.keep_alive_timeout = deadline_s  # from the connection (or last answer) to a full head
        config.read_timeout = 2 * deadline_s  # a last stop; the body's own deadline answers 408 first
        config.ssl_handshake_timeout = deadline_s
        config.h11_max_incomplete_size = MAX_HEAD_BYTES
        config.h2_max_concurrent_streams = 4  # HTTP/2 is answered 505 at once; few streams in flight
        config.h2_max_header_list_size = MAX_HEAD_BYTES
        config.backlog = LISTEN_BACKLOG
        config.graceful_timeout = 1.0
        config.accesslog = None
        config.include_server_header = False
        config.errorlog = logging.getLogger("gpushare_stack.extender.hypercorn")  # the process's own logging
        self.config = config
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._done = threading.Event()

    def serve_forever(self) -> None:
        try:
            asyncio.run(self._serve())
        finally:
            self._done.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._ready.set()
        await serve(self.app, self.config, shutdown_trigger=self._stop.wait, mode="asgi")

    def stop_soon(self) -> None:
        """Ask the loop to stop (from any thread or a signal handler); returns at once."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop serving and wait for ``serve_forever`` to return (from another thread)."""
        if not self._ready.wait(timeout):
            return
        self.stop_soon()
        self._done.wait(timeout)

    def server_close(self) -> None:
        self.socket.close()
        if self.health_socket is not None:
            self.health_socket.close()
