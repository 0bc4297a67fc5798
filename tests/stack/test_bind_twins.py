"""The reference extender binds a pod only when no pod the device plugin could confuse
with it (same gpu-mem per container, bound, not yet allocated) waits on the node."""

from __future__ import annotations

import threading
import time

import pytest

from gpushare_stack import contract
from gpushare_stack.extender.binder import Binder
from gpushare_stack.extender.state import BindError, ClusterState
from gpushare_stack.extender.twins import NodeBinds, waiting_twins
from tests.stack.test_peer_flavors import FakeCore

NOW = 1_000_000.0


def pod(name: str, gib: int, *, node: str | None = None, assigned: str | None = None, age_s: float = 1.0) -> dict:
    annotations = {}
    if assigned is not None:
        annotations[contract.ANN_ASSIGNED] = assigned
        annotations[contract.ANN_ASSUME_TIME] = str(int((NOW - age_s) * 1e9))
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": annotations},
        "spec": {
            **({"nodeName": node} if node else {}),
            "containers": [{"name": "c", "resources": {"limits": {contract.RESOURCE_MEM: str(gib)}}}],
        },
        "status": {"phase": "Pending"},
    }


def test_a_pod_waiting_for_its_allocate_with_the_same_request_is_a_twin():
    me = pod("me", 5)
    assert waiting_twins([pod("a", 5, node="n", assigned="false")], me, NOW) == ["default/a"]


@pytest.mark.parametrize(
    ("other", "why"),
    [
        (pod("a", 4, node="n", assigned="false"), "a different request is told apart by its device count"),
        (pod("a", 5, node="n", assigned="true"), "already allocated"),
        (pod("a", 5, node="n", assigned="false", age_s=400), "bound too long ago: stale"),
        (pod("me", 5, node="n", assigned="false"), "itself"),
        (pod("a", 5, node="n"), "not bound by the extender"),
    ],
)
def test_pods_the_device_plugin_can_tell_apart_are_not_twins(other, why):
    assert waiting_twins([other], pod("me", 5), NOW) == [], why


def test_a_running_or_deleted_pod_is_not_waited_for():
    running = pod("a", 5, node="n", assigned="false")
    running["status"]["phase"] = "Running"
    deleted = pod("b", 5, node="n", assigned="false")
    deleted["metadata"]["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    assert waiting_twins([running, deleted], pod("me", 5), NOW) == []


def _state() -> ClusterState:
    state = ClusterState()
    state.upsert_node(
        {
            "metadata": {"name": "n", "annotations": {}},
            "status": {"capacity": {contract.RESOURCE_MEM: "60", contract.RESOURCE_COUNT: "4"}},
        }
    )
    return state


def test_the_second_of_two_identical_pods_is_bound_only_after_the_first_is_allocated():
    state, core = _state(), FakeCore()
    binder = Binder(state, None)
    binder.core = core
    first, second = pod("first", 5), pod("second", 5)
    for p in (first, second):
        core.pods[("default", p["metadata"]["name"])] = p
        state.upsert_pod(p)
    binder.bind("default", "first", "uid-first", "n")
    first["metadata"]["annotations"][contract.ANN_ASSUME_TIME] = str(time.time_ns())
    with pytest.raises(BindError, match=r"default/first with the same aliyun.com/gpu-mem per container still wait"):
        binder.bind("default", "second", "uid-second", "n")
    assert [b[1] for b in core.bindings] == ["first"], "the refused bind reserved and bound nothing"
    assert state.used("n") == {0: 5}, "the refused bind reserved nothing"
    first["metadata"]["annotations"][contract.ANN_ASSIGNED] = "true"  # the device plugin allocated it
    binder.bind("default", "second", "uid-second", "n")
    assert [b[1] for b in core.bindings] == ["first", "second"]
    # a pod of another size is never held back by a waiting one
    third = pod("third", 4)
    core.pods[("default", "third")] = third
    state.upsert_pod(third)
    binder.bind("default", "third", "uid-third", "n")


def test_node_binds_are_one_at_a_time_per_node_and_independent_across_nodes():
    binds, order = NodeBinds(), []
    binds.acquire("n1")
    binds.acquire("n2")  # another node is not held back
    waiter = threading.Thread(target=lambda: (binds.acquire("n1"), order.append("second"), binds.release("n1")))
    waiter.start()
    time.sleep(0.1)
    order.append("first")
    binds.release("n1")
    waiter.join(5)
    binds.release("n2")
    assert order == ["first", "second"]


def _twins_at_once(wait_s: float) -> tuple[Binder, FakeCore, ClusterState]:
    from gpushare_doubles import faults, registry

    state, core = ClusterState(flavor=registry.extender(fault=faults.TWINS_AT_ONCE)), FakeCore()
    state.flavor.twin_wait_s = wait_s
    state.upsert_node(
        {
            "metadata": {"name": "n", "annotations": {}},
            "status": {"capacity": {contract.RESOURCE_MEM: "60", contract.RESOURCE_COUNT: "4"}},
        }
    )
    binder = Binder(state, None)
    binder.core = core
    for name, gib in (("first", 5), ("second", 5)):
        p = pod(name, gib)
        core.pods[("default", name)] = p
        state.upsert_pod(p)
    return binder, core, state


def test_the_fault_twins_at_once_binds_without_waiting():
    binder, core, _ = _twins_at_once(wait_s=0.05)
    for name in ("first", "second"):
        binder.bind("default", name, f"uid-{name}", "n")
    assert [b[1] for b in core.bindings] == ["first", "second"], "a twin with no partner in flight is bound alone"


def test_the_fault_twins_at_once_binds_a_later_twin_before_an_earlier_one_in_flight():
    binder, core, state = _twins_at_once(wait_s=10.0)
    first = threading.Thread(target=binder.bind, args=("default", "first", "uid-first", "n"))
    started = time.monotonic()
    first.start()
    while not core.patches and time.monotonic() - started < 5:
        time.sleep(0.01)
    time.sleep(0.1)
    assert [b[1] for b in core.bindings] == [], "the earlier twin waits for its partner"
    assert [p[1] for p in core.patches] == ["first"], "the earlier twin's cards are written before it waits"
    binder.bind("default", "second", "uid-second", "n")
    first.join(timeout=5)
    assert not first.is_alive()
    assert time.monotonic() - started < 5, "the earlier twin went on once its partner was bound"
    assert [b[1] for b in core.bindings] == ["second", "first"]
