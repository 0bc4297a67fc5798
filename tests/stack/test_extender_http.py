"""The extender over HTTP with the scheduler's real wire JSON (extender/v1, Go names)."""

from __future__ import annotations

import http.client
import json
import threading

import pytest
from stack_objects import node, pod

from gpushare_stack.allocation import bind_annotations
from gpushare_stack.extender.server import ExtenderServer
from gpushare_stack.extender.state import ClusterState

PREFIX = "/gpushare-scheduler"


@pytest.fixture
def extender():
    state = ClusterState()
    state.replace_nodes([node("gpu-a", [15, 15, 15]), node("gpu-b", [15]), node("gpu-c", [15, 15])])
    state.replace_pods([])
    state.synced.set()
    server = ExtenderServer(("127.0.0.1", 0), state, binder=None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state, server.server_address[1]
    server.shutdown()
    server.server_close()


def call(port: int, method: str, path: str, body: object | None = None) -> tuple[int, object]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    payload = json.loads(resp.read())
    conn.close()
    return resp.status, payload


def test_filter_node_names_keeps_only_fitting_nodes(extender):
    state, port = extender
    status, result = call(
        port,
        "POST",
        f"{PREFIX}/filter",
        {"Pod": pod("seed", 8, count=2), "Nodes": None, "NodeNames": ["gpu-a", "gpu-b", "gpu-c"]},
    )
    assert status == 200
    assert set(result) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert result["NodeNames"] == ["gpu-a", "gpu-c"]
    assert result["FailedAndUnresolvableNodes"] == {
        "gpu-b": "gpushare: aliyun.com/gpu-count=2 exceeds the 1 cards of node gpu-b"
    }
    assert result["FailedNodes"] == {} and result["Error"] == ""


def test_filter_full_node_objects_when_not_cache_capable(extender):
    _, port = extender
    nodes = {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": [node("x", [15, 15]), node("y", [3, 3])]}
    status, result = call(port, "POST", f"{PREFIX}/filter", {"Pod": pod("seed", 8, count=2), "Nodes": nodes})
    assert status == 200
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["x"]
    assert result["NodeNames"] is None
    assert "4 GiB per card on 2 cards exceeds node y" in result["FailedAndUnresolvableNodes"]["y"]


def test_filter_explains_fractional_share(extender):
    _, port = extender
    _, result = call(port, "POST", f"{PREFIX}/filter", {"Pod": pod("odd", 8, count=3), "NodeNames": ["gpu-a"]})
    assert result["NodeNames"] == []
    assert result["FailedAndUnresolvableNodes"]["gpu-a"] == (
        "gpushare: N/M must be an integer: aliyun.com/gpu-mem=8, aliyun.com/gpu-count=3 gives 2.67 GiB per card"
    )


def test_prioritize_returns_host_priority_list(extender):
    state, port = extender
    first = pod("first", 10, count=1)
    alloc = state.assume(first, "gpu-c")
    state.upsert_pod(
        {
            **first,
            "metadata": {**first["metadata"], "annotations": bind_annotations(alloc)},
            "spec": {**first["spec"], "nodeName": "gpu-c"},
        }
    )
    status, result = call(
        port, "POST", f"{PREFIX}/prioritize", {"Pod": pod("next", 4, count=1), "NodeNames": ["gpu-a", "gpu-b", "gpu-c"]}
    )
    assert status == 200
    assert [r["Host"] for r in result] == ["gpu-a", "gpu-b", "gpu-c"]
    scores = {r["Host"]: r["Score"] for r in result}
    assert all(0 <= s <= 10 for s in scores.values())
    assert scores["gpu-c"] > scores["gpu-a"]  # binpack: the partly used card wins


def test_bind_validates_wire_fields(extender):
    _, port = extender
    status, result = call(
        port, "POST", f"{PREFIX}/bind", {"PodName": "p", "PodNamespace": "default", "PodUID": 7, "Node": "gpu-a"}
    )
    assert status == 400
    assert result == {"Error": "gpushare: ExtenderBindingArgs.PodUID must be a str, got 7"}
    status, result = call(
        port, "POST", f"{PREFIX}/bind", {"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": "gpu-a"}
    )
    assert status == 200 and "without an API client" in result["Error"]


def test_bad_bodies_and_unknown_paths(extender):
    _, port = extender
    status, result = call(port, "POST", f"{PREFIX}/filter", b"{not json")
    assert status == 400 and result["Error"].startswith("gpushare: bad request body")
    status, result = call(port, "POST", f"{PREFIX}/filter", {"NodeNames": ["gpu-a"]})
    assert status == 400 and result["Error"] == "gpushare: ExtenderArgs.Pod must be a dict, got None"
    status, _ = call(port, "POST", f"{PREFIX}/preempt", {})
    assert status == 404


def test_inspect_and_healthz(extender):
    state, port = extender
    seed = pod("seed", 8, count=2, namespace="demo")
    alloc = state.assume(seed, "gpu-a")
    state.upsert_pod(
        {
            **seed,
            "metadata": {**seed["metadata"], "annotations": bind_annotations(alloc)},
            "spec": {**seed["spec"], "nodeName": "gpu-a"},
        }
    )
    status, everything = call(port, "GET", f"{PREFIX}/inspect")
    assert status == 200 and [n["name"] for n in everything["nodes"]] == ["gpu-a", "gpu-b", "gpu-c"]
    status, one = call(port, "GET", f"{PREFIX}/inspect/gpu-a")
    assert status == 200
    devs = one["nodes"][0]["devs"]
    assert [(d["id"], d["usedGPU"]) for d in devs] == [(0, 4), (1, 4), (2, 0)]
    assert devs[0]["pods"] == [{"name": "seed", "namespace": "demo", "usedGPU": 4}]
    status, missing = call(port, "GET", f"{PREFIX}/inspect/nope")
    assert status == 404 and "nope" in missing["error"]
    assert call(port, "GET", "/healthz") == (200, {"synced": True})


def test_unsynced_cache_refuses_filter(extender):
    state, port = extender
    state.synced.clear()
    _, result = call(port, "POST", f"{PREFIX}/filter", {"Pod": pod("p", 4), "NodeNames": ["gpu-a"]})
    assert result["Error"] == "gpushare: extender cache not synced yet"
    assert call(port, "GET", "/healthz")[0] == 503


class _RefusingBinder:
    """Stands in for the API-backed Binder: the state refuses, as on a full node."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    def bind(self, namespace, name, uid, node):
        return self.state.assume(pod(name, 64, count=2, namespace=namespace, uid=uid), node)


def test_bind_failure_is_reported_in_binding_result():
    state = ClusterState()
    state.replace_nodes([node("gpu-a", [15, 15])])
    state.synced.set()
    server = ExtenderServer(("127.0.0.1", 0), state, binder=_RefusingBinder(state))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        status, result = call(
            server.server_address[1],
            "POST",
            f"{PREFIX}/bind",
            {"PodName": "big", "PodNamespace": "ns", "PodUID": "u-1", "Node": "gpu-a"},
        )
    finally:
        server.shutdown()
        server.server_close()
    assert status == 200
    assert result == {
        "Error": "gpushare: 32 GiB per card on 2 cards exceeds node gpu-a: only 0 of its cards have 32 GiB in total"
    }
    assert state.used("gpu-a") == {}
