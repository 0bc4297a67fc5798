"""The extender's state layer: filter reasons, restart rebuild, concurrent binds."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from stack_objects import node, pod

from gpushare_stack import contract
from gpushare_stack.allocation import allocation_from_pod, bind_annotations
from gpushare_stack.extender.state import BindError, ClusterState


def _state(*nodes, policy="binpack") -> ClusterState:
    state = ClusterState(policy=policy)
    state.replace_nodes(nodes)
    state.replace_pods([])
    return state


def _bound(state: ClusterState, p: dict, node_name: str) -> dict:
    """What the API server holds after a successful bind: annotations + nodeName."""
    alloc = state.assume(p, node_name)
    bound = {
        **p,
        "metadata": {**p["metadata"], "annotations": bind_annotations(alloc)},
        "spec": {**p["spec"], "nodeName": node_name},
    }
    state.upsert_pod(bound)
    return bound


def test_filter_keeps_nodes_with_m_cards_of_share_free():
    state = _state(node("a", [15, 15]), node("b", [15]), node("c", [15, 15, 15]))
    _bound(state, pod("hog", 12, count=1), "c")
    _bound(state, pod("hog2", 12, count=1), "c")
    outcome = state.filter(pod("seed", 8, count=2), ["a", "b", "c"])
    assert outcome.fits == ["a"]
    assert outcome.unresolvable == {"b": "gpushare: aliyun.com/gpu-count=2 exceeds the 1 cards of node b"}
    assert "node c has 1 healthy card(s) with 4 GiB free, needs 2" in outcome.failed["c"]


def test_fractional_share_makes_every_node_unresolvable():
    state = _state(node("a", [15, 15, 15]))
    outcome = state.filter(pod("odd", 8, count=3), ["a"])
    assert outcome.fits == [] and outcome.failed == {}
    assert outcome.unresolvable == {
        "a": "gpushare: N/M must be an integer: aliyun.com/gpu-mem=8, aliyun.com/gpu-count=3 gives 2.67 GiB per card"
    }


def test_node_without_annotation_is_sized_from_capacity_and_bad_annotation_is_reported():
    plain = node("plain", [15, 15], annotate=False)
    broken = node("broken", [15])
    broken["metadata"]["annotations"][contract.NODE_CARDS_ANNOTATION] = "[{oops"
    state = _state(plain, broken)
    outcome = state.filter(pod("p", 8, count=2), ["plain", "broken", "ghost"])
    assert outcome.fits == ["plain"]
    assert "annotation gpushare.conformance.io/cards of node broken is not JSON" in outcome.unresolvable["broken"]
    assert outcome.failed == {"ghost": "gpushare: node ghost is not in the extender's cache"}


def test_assume_writes_seed_annotations():
    state = ClusterState(clock=lambda: 1_700_000_000_000_000_000)
    state.replace_nodes([node("a", [15, 15, 15])])
    alloc = state.assume(pod("seed", 8, count=2), "a")
    ann = bind_annotations(alloc)
    assert ann[contract.ANN_IDX] == "0,1"
    assert ann[contract.ANN_POD] == "8"
    assert ann[contract.ANN_ASSUME_TIME] == "1700000000000000000"
    assert ann[contract.ANN_ASSIGNED] == "false"
    assert ann[contract.ANN_ACK_ALLOCATION] == '{"0":{"0":4,"1":4}}'
    assert ann[contract.ANN_ACK_ASSIGNED] == "false"


def test_restart_rebuilds_usage_from_annotations_and_frees_terminated_pods():
    first = _state(node("a", [15, 15]))
    running = _bound(first, pod("run", 20, count=2), "a")  # 10 + 10
    done = _bound(first, pod("done", 8, count=2), "a")  # 4 + 4
    done = {**done, "status": {"phase": "Succeeded"}}
    running = {**running, "status": {"phase": "Running"}}

    restarted = ClusterState()
    restarted.replace_nodes([node("a", [15, 15])])
    restarted.replace_pods([running, done])
    assert restarted.used("a") == {0: 10, 1: 10}
    # 5 GiB free per card: a 2x5 pod fits, a 2x6 pod must not (no double-booking)
    assert restarted.filter(pod("fits", 10, count=2), ["a"]).fits == ["a"]
    assert restarted.filter(pod("nofit", 12, count=2), ["a"]).fits == []
    with pytest.raises(BindError):
        restarted.assume(pod("nofit", 12, count=2), "a")
    restarted.remove_pod(running)
    assert restarted.used("a") == {}


def test_assumed_reservation_survives_stale_watch_events_and_relist():
    state = _state(node("a", [15]))
    p = pod("p", 10)
    state.assume(p, "a")
    state.upsert_pod(p)  # the informer's older copy, without annotations or nodeName
    assert state.used("a") == {0: 10}
    state.replace_pods([p])  # relist while the bind is in flight
    assert state.used("a") == {0: 10}
    state.forget(p["metadata"]["uid"])  # the bind failed
    assert state.used("a") == {}


def test_concurrent_binds_never_overcommit_a_card():
    cards = [15] * 8
    state = _state(node("a", cards), node("b", cards))
    pods = [pod(f"p{i}", g, count=c) for i, (g, c) in enumerate([(8, 2), (4, 1), (12, 4), (6, 2), (3, 1)] * 40)]
    barrier = threading.Barrier(16)

    def bind(p):
        try:
            barrier.wait(timeout=5)
        except threading.BrokenBarrierError:
            pass
        for target in ("a", "b"):
            try:
                return state.assume(p, target)
            except BindError:
                continue
        return None

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(bind, pods))
    placed = [r for r in results if r is not None]
    assert 0 < len(placed) < len(pods)  # the cluster fills up and then refuses
    for name in ("a", "b"):
        used = state.used(name)
        assert all(used.get(i, 0) <= 15 for i in range(8)), used
        expected: dict[int, int] = {}
        for alloc in placed:
            if alloc.node == name:
                assert len(alloc.cards) == len(set(alloc.cards))
                for card, gib in alloc.per_card.items():
                    expected[card] = expected.get(card, 0) + gib
        assert used == expected
    assert sum(a.total_gib for a in placed) == sum(sum(state.used(n).values()) for n in ("a", "b"))


def test_allocation_annotations_round_trip_and_open_form_is_read():
    state = _state(node("a", [15, 15, 15]))
    bound = _bound(state, pod("two", [4, 2], count=2), "a")
    alloc = allocation_from_pod(bound)
    assert alloc.containers == {0: {0: 2, 1: 2}, 1: {0: 1, 1: 1}}
    assert alloc.per_card == {0: 3, 1: 3}
    open_form = pod(
        "old", 8, node="a", annotations={contract.ANN_IDX: "1,2", contract.ANN_POD: "8", contract.ANN_ASSUME_TIME: "5"}
    )
    assert allocation_from_pod(open_form).per_card == {1: 4, 2: 4}


def test_inspect_reports_per_card_usage_in_gpushare_format():
    state = _state(node("a", [15, 15]))
    _bound(state, pod("seed", 8, count=2, namespace="ns"), "a")
    report = state.inspect("a")
    (item,) = report["nodes"]
    assert item["name"] == "a" and item["totalGPU"] == 30 and item["usedGPU"] == 8
    assert [(d["id"], d["totalGPU"], d["usedGPU"]) for d in item["devs"]] == [(0, 15, 4), (1, 15, 4)]
    assert item["devs"][0]["pods"] == [{"name": "seed", "namespace": "ns", "usedGPU": 4}]
    with pytest.raises(KeyError):
        state.inspect("missing")


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpushare_stack.extender import selection  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 6)), max_size=25), st.integers(1, 5), st.integers(1, 10))
def test_filter_fast_path_agrees_with_the_rules(placements, count, share):
    """The cached free-memory index gives the same verdict as selection.misfit."""
    state = _state(node("a", [15, 15, 15, 7], healthy=[True, True, False, True]))
    for i, (c, g) in enumerate(placements):
        try:
            _bound(state, pod(f"p{i}", c * g, count=c), "a")
        except BindError:
            pass
    cards = [selection.Card(0, 15), selection.Card(1, 15), selection.Card(2, 15, healthy=False), selection.Card(3, 7)]
    expected = selection.misfit("a", cards, state.used("a"), count, share)
    outcome = state.filter(pod("probe", count * share, count=count), ["a"])
    assert (outcome.fits == ["a"]) == (expected is None)
    for c in cards:
        assert state.used("a").get(c.index, 0) <= c.total_gib
        if not c.healthy:
            assert state.used("a").get(c.index, 0) == 0


def test_pods_without_gpu_mem_pass_the_filter_untouched():
    state = _state(node("a", [15]), node("b", [15]))
    plain = pod("plain", 1)
    plain["spec"]["containers"][0]["resources"] = {}
    outcome = state.filter(plain, ["a", "b", "ghost"])
    assert outcome.fits == ["a", "b", "ghost"] and not outcome.failed and not outcome.unresolvable


def test_malformed_allocation_annotation_is_kept_out_of_usage():
    state = _state(node("a", [15]))
    broken = pod("broken", 4, node="a", annotations={contract.ANN_IDX: "0", contract.ANN_POD: "four"})
    state.upsert_pod(broken)
    assert state.used("a") == {}
    with pytest.raises(Exception, match=r"ALIYUN_COM_GPU_MEM_POD of pod default/broken must be an integer, got 'four'"):
        allocation_from_pod(broken)


def test_node_updates_reread_cards_only_when_the_card_source_changes():
    state = _state(node("a", [15, 15]))
    outcome = state.filter(pod("big", 24, count=2), ["a"])
    assert outcome.fits == ["a"]
    heartbeat = node("a", [15, 15])
    heartbeat["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    state.upsert_node(heartbeat)  # same cards: nothing to re-read
    assert state.filter(pod("big", 24, count=2), ["a"]).fits == ["a"]
    state.upsert_node(node("a", [15, 7]))  # the device plugin reports a smaller card
    outcome = state.filter(pod("big", 24, count=2), ["a"])
    assert outcome.fits == []
    assert outcome.unresolvable == {
        "a": "gpushare: 12 GiB per card on 2 cards exceeds node a: only 1 of its cards have 12 GiB in total"
    }
    state.replace_nodes([node("a", [15, 15])])  # relist with the cards back
    assert state.filter(pod("big", 24, count=2), ["a"]).fits == ["a"]
    # capacity-sized nodes too: a changed gpu-count is a changed source
    plain = node("p", [15, 15], annotate=False)
    state.upsert_node(plain)
    assert state.filter(pod("big", 24, count=2), ["p"]).fits == ["p"]
    plain["status"]["capacity"][contract.RESOURCE_COUNT] = "3"  # 30 GiB over 3 cards: 10 each
    state.upsert_node(plain)
    assert state.filter(pod("big", 24, count=2), ["p"]).fits == []


def test_filter_takes_node_objects_as_mappings():
    """state.filter with node dicts, as before the server read them with msgspec."""
    state = _state(node("a", [15, 15]), node("b", [15]))
    objects = [node("a", [15, 15]), node("b", [15]), node("new", [15, 15])]
    outcome = state.filter(pod("seed", 8, count=2), objects)
    assert outcome.fits == ["a", "new"]
    assert outcome.unresolvable == {"b": "gpushare: aliyun.com/gpu-count=2 exceeds the 1 cards of node b"}
