"""The extender under hostile or broken clients: only the scheduler may call its verbs,
and every request is bounded and answered (docs/threat-model.md).

Bounded: a few dozen connections and bodies of a few MB, on a server whose idle
time-out is one second, so the test takes seconds.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from stack_objects import node, pod

from gpushare_stack.extender import server as extender_server
from gpushare_stack.extender.server import ExtenderServer
from gpushare_stack.extender.state import ClusterState

PREFIX = "/gpushare-scheduler"


class RecordingBinder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, str]] = []

    def bind(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        self.calls.append((namespace, name, uid, node_name))


def serve(**options) -> Iterator[tuple[ExtenderServer, int]]:
    state = ClusterState()
    state.replace_nodes([node("gpu-a", [15, 15])])
    state.replace_pods([])
    state.synced.set()
    server = ExtenderServer(("127.0.0.1", 0), state, binder=RecordingBinder(), **options)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def extender():
    yield from serve()


def raw_request(port: int, data: bytes, timeout: float = 5) -> tuple[int, dict]:
    """Send ``data`` as it is; the status and JSON body of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = sock.recv(65536)
            if not chunk:
                raise AssertionError(f"connection closed without an answer after {reply!r}")
            reply += chunk
        head, _, body = reply.partition(b"\r\n\r\n")
        length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
        while len(body) < length:
            body += sock.recv(65536)
    return int(head.split()[1]), json.loads(body)


def post(port: int, verb: str, body: bytes) -> tuple[int, dict]:
    head = f"POST {PREFIX}/{verb} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    return raw_request(port, head + body)


def test_a_bind_from_outside_the_trusted_networks_is_refused_and_binds_nothing():
    for server, port in serve(trusted_clients=("10.255.255.0/24",)):  # the test's 127.0.0.1 is not in it
        args = {"PodName": "victim", "PodNamespace": "other-team", "PodUID": "u-1", "Node": "gpu-a"}
        status, body = post(port, "bind", json.dumps(args).encode())
        assert status == 403 and "127.0.0.1 may not call the scheduler's verbs" in body["Error"]
        status, body = post(port, "filter", b"{}")
        assert status == 403
        assert server.binder.calls == []
        # reading stays open (the kubelet's probe, the suite's inspect through the API server)
        assert raw_request(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200


@pytest.mark.parametrize(
    ("data", "status", "words"),
    [
        (b"POST /gpushare-scheduler/filter HTTP/1.1\r\nHost: x\r\n\r\n", 411, "Content-Length is required"),
        (b"POST /gpushare-scheduler/filter HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400, "'-5' is not a byte count"),
        (b"POST /gpushare-scheduler/filter HTTP/1.1\r\nContent-Length: 9x\r\n\r\n", 400, "'9x' is not a byte count"),
        (
            b"POST /gpushare-scheduler/filter HTTP/1.1\r\nContent-Length: 191000000\r\n\r\n",
            413,
            "body of 191000000 bytes is over the 67108864-byte limit",
        ),
        (
            b"POST /gpushare-scheduler/filter HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            411,
            "not Transfer-Encoding",
        ),
    ],
    ids=["no-length", "negative-length", "bad-length", "huge-length", "chunked"],
)
def test_bad_framing_is_answered_with_the_reason(extender, data, status, words):
    _server, port = extender
    got, body = raw_request(port, data)
    assert got == status and words in body["Error"], body


@pytest.mark.parametrize(
    ("verb", "body", "words"),
    [
        ("filter", b"[" * 100_000 + b"]" * 100_000, "bad request body"),
        ("filter", b'{"Pod": {"spec": 7}, "NodeNames": ["gpu-a"]}', "malformed filter request"),
        ("filter", b'{"Pod": {}, "NodeNames": "gpu-a"}', ""),
        ("bind", b'{"PodName": 5}', "PodName"),
        ("prioritize", b"\xff\xfe not json", "bad request body"),
    ],
    ids=["deep-json", "pod-spec-not-object", "node-names-not-list", "bind-name-not-string", "not-utf8"],
)
def test_malformed_bodies_get_a_400_naming_the_problem(extender, verb, body, words):
    _server, port = extender
    status, answer = post(port, verb, body)
    assert status == 400, (status, answer)
    assert words in answer["Error"], answer


def test_idle_and_half_sent_connections_are_bounded_and_dropped():
    for _server, port in serve(max_connections=16, idle_timeout_s=1.0):
        idle = []
        refused = 0
        for _ in range(40):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(b"POST /gpushare-scheduler/filter HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
            idle.append(sock)
        time.sleep(0.3)
        for sock in idle:  # past the limit: an immediate 503, no thread held
            sock.settimeout(0.2)
            try:
                if sock.recv(200).startswith(b"HTTP/1.1 503"):
                    refused += 1
            except TimeoutError:
                pass
        assert refused == 24, refused
        started = time.monotonic()
        time.sleep(1.5)  # the idle time-out frees the 16 held connections
        status, body = raw_request(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 200 and body == {"synced": True}
        assert time.monotonic() - started < 5
        for sock in idle:
            sock.close()


def test_a_scheduler_sized_request_is_still_served(extender):
    """The bounds leave room for what a scheduler sends: 1,000 full node objects."""
    _server, port = extender
    nodes = [node(f"gpu-{i}", [15, 15]) for i in range(1000)]
    args = {"Pod": pod("p", gib=2), "Nodes": {"items": nodes}}
    body = json.dumps(args).encode()
    assert len(body) < extender_server.MAX_BODY_BYTES
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", f"{PREFIX}/filter", body=body)
    resp = conn.getresponse()
    assert resp.status == 200
    assert "Error" in json.loads(resp.read())
