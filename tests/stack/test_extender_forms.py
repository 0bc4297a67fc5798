"""Both filter request forms over HTTP: node names (nodeCacheCapable) and whole Node
objects (a scheduler configured without it) must give the same decisions and reasons,
and the object form must hand back the kept nodes exactly as the scheduler sent them."""

from __future__ import annotations

import http.client
import json
import random
import threading

import pytest
from stack_objects import node, pod

from gpushare_stack import contract
from gpushare_stack.allocation import bind_annotations
from gpushare_stack.extender.server import ExtenderServer
from gpushare_stack.extender.state import BindError, ClusterState

PREFIX = "/gpushare-scheduler"


def kubelet_fields(obj: dict, k: int) -> dict:
    """What a real Node carries besides cards: labels, conditions, node info; some
    strings the Go encoder escapes (<, >, &) and non-ASCII text."""
    obj["metadata"].update(
        {"uid": f"uid-{k}", "resourceVersion": str(1000 + k), "creationTimestamp": "2026-01-05T08:00:00Z"}
    )
    obj["metadata"].setdefault("labels", {}).update(
        {"kubernetes.io/hostname": obj["metadata"]["name"], "rack": f"r<{k % 3}>&x", "owner": "équipe-α"}
    )
    obj["metadata"].setdefault("annotations", {})["node.alpha.kubernetes.io/ttl"] = "0"
    status = obj.setdefault("status", {})
    status["conditions"] = [
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": None,
        }
    ]
    status["nodeInfo"] = {"kubeletVersion": "v1.34.4", "architecture": "amd64", "bootID": "", "cpu": 1.5e3}
    status["allocatable"] = dict(status.get("capacity", {}))
    obj["spec"] = {"podCIDR": f"10.0.{k}.0/24", "taints": []}
    return obj


def random_cluster(rng: random.Random) -> tuple[ClusterState, list[dict]]:
    """Nodes of every kind the filter tells apart, with random pods bound on them."""
    nodes = []
    for k in range(rng.randint(1, 14)):
        name = f"n{k}"
        kind = rng.choice(["annotated"] * 5 + ["capacity", "bare", "broken", "bad-capacity"])
        sizes = [rng.choice([3, 7, 15, 15, 31]) for _ in range(rng.randint(1, 8))]
        healthy = [rng.random() > 0.15 for _ in sizes]
        if kind == "annotated":
            obj = node(name, sizes, healthy)
        elif kind == "capacity":
            obj = node(name, [sizes[0]] * len(sizes), annotate=False)
        elif kind == "bare":
            obj = node(name, sizes, annotate=False)
            obj["status"] = {"capacity": {"cpu": "8"}}
        elif kind == "broken":
            obj = node(name, sizes)
            obj["metadata"]["annotations"][contract.NODE_CARDS_ANNOTATION] = rng.choice(
                [
                    "[{oops",
                    '{"index": 0}',
                    '[{"index": 0, "memory_gib": "15"}]',
                    '[{"index": 0, "memory_gib": 15}, {"index": 0, "memory_gib": 15}]',
                ]
            )
        else:
            obj = node(name, sizes, annotate=False)
            obj["status"]["capacity"][contract.RESOURCE_COUNT] = "two"
        nodes.append(kubelet_fields(obj, k))
    state = ClusterState(policy=rng.choice(["binpack", "spread"]))
    state.replace_nodes(nodes)
    bound = []
    for i in range(rng.randint(0, 40)):
        count = rng.randint(1, 3)
        p = pod(f"held-{i}", count * rng.randint(1, 8), count=count)
        try:
            alloc = state.assume(p, rng.choice(nodes)["metadata"]["name"])
        except (BindError, ValueError):
            continue
        bound.append(
            {
                **p,
                "metadata": {**p["metadata"], "annotations": bind_annotations(alloc)},
                "spec": {**p["spec"], "nodeName": alloc.node},
            }
        )
    state.replace_pods(bound)  # as after a restart: usage rebuilt from annotations
    state.synced.set()
    return state, nodes


def random_pod(rng: random.Random, i: int) -> dict:
    shape = rng.random()
    if shape < 0.1:  # asks no gpu-mem: passes untouched
        p = pod(f"plain-{i}", 1)
        p["spec"]["containers"][0]["resources"] = {}
        return p
    if shape < 0.2:  # N/M not an integer
        return pod(f"odd-{i}", 7, count=2)
    count = rng.randint(1, 4)
    return pod(f"p-{i}", count * rng.randint(1, 16), count=count)


@pytest.fixture
def serve():
    servers = []

    def start(state: ClusterState) -> int:
        server = ExtenderServer(("127.0.0.1", 0), state, binder=None)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def post(port: int, verb: str, body: bytes) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", f"{PREFIX}/{verb}", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data


def go_json(value: object) -> bytes:
    """Like Go's encoding/json: compact, and <, >, & escaped as \\u003c, \\u003e, \\u0026."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode()


def object_form(p: dict, nodes: list[dict]) -> tuple[bytes, list[bytes]]:
    items = [go_json(n) for n in nodes]
    body = (
        b'{"Pod":'
        + go_json(p)
        + b',"Nodes":{"metadata":{"resourceVersion":"42"},"items":['
        + b",".join(items)
        + b']},"NodeNames":null}'
    )
    return body, items


def names_form(p: dict, names: list[str]) -> bytes:
    return go_json({"Pod": p, "Nodes": None, "NodeNames": names})


def raw_items(reply: bytes) -> list[bytes]:
    """The reply's Nodes.items, each as its exact bytes (split with the parser's offsets)."""
    decoder = json.JSONDecoder()
    text = reply.decode()
    start = text.index('"items":[') + len('"items":[')
    out = []
    while text[start] != "]":
        _, end = decoder.raw_decode(text, start)
        out.append(text[start:end].encode())
        start = end + 1 if text[end] == "," else end
    return out


def test_both_forms_give_the_same_decisions_over_random_clusters(serve):
    rng = random.Random(20261203)
    checked = kept_total = failed_total = 0
    for _ in range(25):
        state, nodes = random_cluster(rng)
        port = serve(state)
        names = [n["metadata"]["name"] for n in nodes]
        for i in range(8):
            p = random_pod(rng, i)
            sent = rng.sample(nodes, rng.randint(1, len(nodes)))  # the scheduler's candidates, its order
            status_a, reply_a = post(port, "filter", names_form(p, [n["metadata"]["name"] for n in sent]))
            body, items = object_form(p, sent)
            status_b, reply_b = post(port, "filter", body)
            assert status_a == status_b == 200
            by_names, by_objects = json.loads(reply_a), json.loads(reply_b)
            kept = [n["metadata"]["name"] for n in by_objects["Nodes"]["items"]]
            assert kept == by_names["NodeNames"], (p, names)
            assert by_objects["FailedNodes"] == by_names["FailedNodes"]
            assert by_objects["FailedAndUnresolvableNodes"] == by_names["FailedAndUnresolvableNodes"]
            assert by_objects["NodeNames"] is None and by_objects["Error"] == by_names["Error"] == ""
            assert by_objects["Nodes"]["metadata"] == {"resourceVersion": "42"}
            # each kept node comes back byte for byte as sent (escapes included)
            sent_bytes = dict(zip([n["metadata"]["name"] for n in sent], items, strict=True))
            assert raw_items(reply_b) == [sent_bytes[name] for name in kept]
            checked += 1
            kept_total += len(kept)
            failed_total += len(by_names["FailedNodes"]) + len(by_names["FailedAndUnresolvableNodes"])
    assert checked == 200 and kept_total > 100 and failed_total > 100  # both outcomes well covered


def test_prioritize_scores_the_same_in_both_forms(serve):
    rng = random.Random(5)
    state, nodes = random_cluster(rng)
    port = serve(state)
    p = pod("next", 4, count=2)
    _, by_names = post(port, "prioritize", names_form(p, [n["metadata"]["name"] for n in nodes]))
    _, by_objects = post(port, "prioritize", object_form(p, nodes)[0])
    assert json.loads(by_names) == json.loads(by_objects)
    assert [h["Host"] for h in json.loads(by_objects)] == [n["metadata"]["name"] for n in nodes]


def test_node_objects_are_judged_on_their_own_cards_when_the_cache_differs(serve):
    state = ClusterState()
    state.replace_nodes([node("a", [15]), node("b", [15, 15])])
    state.replace_pods([])
    state.synced.set()
    port = serve(state)
    p = pod("two", 8, count=2)
    # The scheduler already sees a second card on a, a node c the extender has not
    # listed yet, and b down to one card.
    sent = [node("a", [15, 15]), node("b", [15]), node("c", [15, 15])]
    _, reply = post(port, "filter", object_form(p, sent)[0])
    result = json.loads(reply)
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["a", "c"]
    assert result["FailedAndUnresolvableNodes"] == {
        "b": "gpushare: aliyun.com/gpu-count=2 exceeds the 1 cards of node b"
    }
    # by name the cache's view stands: a has one card, c is unknown
    _, reply = post(port, "filter", names_form(p, ["a", "b", "c"]))
    result = json.loads(reply)
    assert result["NodeNames"] == ["b"]
    assert result["FailedNodes"] == {"c": "gpushare: node c is not in the extender's cache"}
    # a changed annotation is read again, not served from an earlier parse
    sent[0] = node("a", [3, 3])
    _, reply = post(port, "filter", object_form(p, sent)[0])
    result = json.loads(reply)
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["c"]
    assert result["FailedAndUnresolvableNodes"]["a"] == (
        "gpushare: 4 GiB per card on 2 cards exceeds node a: only 0 of its cards have 4 GiB in total"
    )


def test_object_form_counts_pods_the_extender_holds(serve):
    state = ClusterState()
    state.replace_nodes([node("a", [15, 15])])
    held = pod("held", 24, count=2)
    alloc = state.assume(held, "a")
    state.replace_pods(
        [
            {
                **held,
                "metadata": {**held["metadata"], "annotations": bind_annotations(alloc)},
                "spec": {**held["spec"], "nodeName": "a"},
            }
        ]
    )
    state.synced.set()
    port = serve(state)
    for sent in ([node("a", [15, 15])], [node("a", [15, 15, 15])]):  # as cached, and differing
        _, reply = post(port, "filter", object_form(pod("more", 8, count=2), sent)[0])
        result = json.loads(reply)
        assert result["Nodes"]["items"] == []
        assert "node a has" in result["FailedNodes"]["a"] and "with 4 GiB free, needs 2" in result["FailedNodes"]["a"]


def test_object_form_wire_errors(serve):
    state = ClusterState()
    state.replace_nodes([node("a", [15])])
    state.synced.set()
    port = serve(state)
    p = go_json(pod("p", 4))
    status, reply = post(port, "filter", b'{"Pod":' + p + b',"Nodes":{"items":[7]}}')
    assert status == 400
    assert json.loads(reply)["Error"].startswith(
        "gpushare: ExtenderArgs.Nodes holds a node that is not a v1.Node: Expected `object`, got `int`"
    )
    status, reply = post(port, "filter", b'{"Pod":' + p + b',"Nodes":null,"NodeNames":null}')
    assert (status, json.loads(reply)) == (400, {"Error": "gpushare: ExtenderArgs.Nodes must be a dict, got None"})
    status, reply = post(port, "filter", b'{"Pod":' + p + b',"Nodes":{"items":[{"metadata":{"name":3}}]}}')
    assert status == 400 and "$.metadata.name" in json.loads(reply)["Error"]
    # an empty NodeList comes back empty, with the list's other fields as sent
    status, reply = post(port, "filter", b'{"Pod":' + p + b',"Nodes":{"kind":"NodeList","items":null}}')
    assert status == 200
    assert json.loads(reply)["Nodes"] == {"kind": "NodeList", "items": []}
