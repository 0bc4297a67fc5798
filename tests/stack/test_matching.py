"""Allocate's pod matching (pure logic over pod dicts) and the env it produces."""

from __future__ import annotations

import pytest
from stack_objects import pod

from gpushare_stack import contract
from gpushare_stack.allocation import Allocation, bind_annotations
from gpushare_stack.deviceplugin.environment import container_environment
from gpushare_stack.deviceplugin.matching import AllocationMatchError, match_allocation


def bound(name: str, gib, count: int, cards: tuple[int, ...], assume: int, node: str = "n1", **kw) -> dict:
    gibs = gib if isinstance(gib, list) else [gib]
    alloc = Allocation(
        uid="",
        namespace="default",
        name=name,
        node=node,
        containers={i: {c: g // count for c in cards} for i, g in enumerate(gibs)},
        assume_time_ns=assume,
    )
    return pod(name, gib, count=count, node=node, annotations=bind_annotations(alloc), **kw)


def test_oldest_assume_time_wins_among_equal_requests():
    young = bound("young", 8, 2, (2, 3), assume=200)
    old = bound("old", 8, 2, (0, 1), assume=100)
    match = match_allocation([young, old], "n1", 8, {})
    assert (match.name, match.cards, match.per_card_gib, match.pod_total_gib) == ("old", (0, 1), 4, 8)
    assert match.pod_done


def test_only_pending_unassigned_pods_of_this_node_with_that_request_match():
    assigned = bound("assigned", 8, 2, (0, 1), assume=1)
    assigned["metadata"]["annotations"][contract.ANN_ASSIGNED] = "true"
    other_node = bound("elsewhere", 8, 2, (0, 1), assume=2, node="n2")
    running = bound("running", 8, 2, (0, 1), assume=3, phase="Running")
    other_size = bound("bigger", 12, 2, (0, 1), assume=4)
    unannotated = pod("plain", 8, count=2, node="n1")
    right = bound("right", 8, 2, (1, 2), assume=9)
    pods = [assigned, other_node, running, other_size, unannotated, right]
    assert match_allocation(pods, "n1", 8, {}).name == "right"
    with pytest.raises(AllocationMatchError) as info:
        match_allocation(pods[:-1], "n1", 8, {})
    assert str(info.value).startswith(
        "gpushare: no pending pod on node n1 has a container asking aliyun.com/gpu-mem=8 "
        "with ALIYUN_COM_GPU_MEM_ASSIGNED=false"
    )


def test_multi_container_pod_is_matched_container_by_container():
    two = bound("two", [4, 2], 2, (0, 3), assume=5)
    uid = two["metadata"]["uid"]
    first = match_allocation([two], "n1", 4, {})
    assert (first.container_index, first.cards, first.per_card_gib, first.pod_done) == (0, (0, 3), 2, False)
    assert first.pod_total_gib == 6
    # the kubelet goes in order: container 1's 2 GiB does not match before container 0 is done
    with pytest.raises(AllocationMatchError):
        match_allocation([two], "n1", 2, {})
    second = match_allocation([two], "n1", 2, {uid: {0}})
    assert (second.container_index, second.per_card_gib, second.pod_done) == (1, 1, True)


def test_malformed_annotations_are_reported_not_guessed():
    broken = bound("broken", 8, 2, (0, 1), assume=1)
    broken["metadata"]["annotations"][contract.ANN_ACK_ALLOCATION] = "{bad"
    with pytest.raises(
        AllocationMatchError, match=r"skipped: default/broken: .*scheduler.framework.gpushare.allocation"
    ):
        match_allocation([broken], "n1", 8, {})


def test_seed_environment_and_mounts():
    env, mounts = container_environment((1, 2), per_card_gib=4, pod_total_gib=8, card_gib=15)
    assert env == {
        "NVIDIA_VISIBLE_DEVICES": "1,2",
        "ALIYUN_COM_GPU_MEM_IDX": "1,2",
        "ALIYUN_COM_GPU_MEM_POD": "8",
        "ALIYUN_COM_GPU_MEM_CONTAINER": "4",
        "ALIYUN_COM_GPU_MEM_DEV": "15",
        "LD_PRELOAD": "/usr/local/gpushare/lib/libgpushare-shim.so",
        "GPUSHARE_MEMORY_LIMIT_0": "4GiB",
        "GPUSHARE_MEMORY_LIMIT_1": "4GiB",
    }
    assert [(m.host_path, m.container_path, m.read_only) for m in mounts] == [
        ("/var/lib/gpushare/native", "/usr/local/gpushare", True)
    ]


def test_allocate_adds_no_driver_file_the_node_toolkit_does():
    """The same env and mounts on mock and real nodes: NVML, libcuda, nvidia-smi and the
    mock inventory come from the node's container toolkit, never from Allocate."""
    env, mounts = container_environment((0,), 4, 4, 15, native_host_dir="/srv/native/")
    assert not {"LD_LIBRARY_PATH", "GPUSHARE_MOCK_INVENTORY"} & set(env)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "0"
    assert [(m.host_path, m.container_path) for m in mounts] == [("/srv/native", "/usr/local/gpushare")]
