"""Allocate's pod matching (pure logic over pod dicts) and the env it produces."""

from __future__ import annotations

import pytest
from stack_objects import pod

from gpushare_doubles import registry
from gpushare_stack import contract
from gpushare_stack.allocation import Allocation, bind_annotations
from gpushare_stack.deviceplugin.environment import container_environment
from gpushare_stack.deviceplugin.matching import AllocationMatchError, match_allocation
from gpushare_stack.deviceplugin.policy import ReferenceDevicePlugin


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


def test_reference_allocate_writes_read_only_limits_and_preload_files_for_the_container(tmp_path):
    """The shim's limits and its preload come from files mounted read-only, so a workload
    that unsets or raises its variables changes nothing (docs/threat-model.md)."""
    from types import SimpleNamespace

    from gpushare_stack.deviceplugin.container_files import collect_garbage

    cards = [SimpleNamespace(index=i, memory_gib=15) for i in range(3)]
    match = SimpleNamespace(
        cards=(1, 2), shares_gib=None, per_card_gib=4, pod_total_gib=8, uid="u-1", container_index=0
    )

    class Kube:
        def pod_uids(self, node):
            return ["u-1"]

    plugin = SimpleNamespace(
        cards=cards,
        native_host_dir="/var/lib/gpushare/native",
        containers_dir=str(tmp_path),
        kube=Kube(),
        node="n1",
    )
    (tmp_path / "gone-pod-0").mkdir()
    env, mounts = ReferenceDevicePlugin().container_environment(plugin, match)
    directory = tmp_path / "u-1-0"
    assert (directory / "limits").read_text() == (
        "GPUSHARE_MEMORY_LIMIT_0=4GiB\nGPUSHARE_MEMORY_LIMIT_1=4GiB\nGPUSHARE_USAGE_FILE=/run/gpushare/usage\n"
    )
    assert (directory / "ld.so.preload").read_text() == "/usr/local/gpushare/lib/libgpushare-shim.so\n"
    assert oct((directory / "limits").stat().st_mode & 0o777) == "0o444"
    assert [(m.container_path, m.host_path, m.read_only) for m in mounts][1:] == [
        ("/etc/gpushare/limits", str(directory / "limits"), True),
        ("/etc/ld.so.preload", str(directory / "ld.so.preload"), True),
        ("/run/gpushare/usage", str(directory / "usage"), True),
    ]
    usage = directory / "usage"
    # The ledger: its bytes are words for a person (the locks on it are the accounting),
    # and every process of the container, whatever its user, can open it to lock, none write.
    assert usage.read_text().startswith("gpushare ledger: ") and (usage.stat().st_mode & 0o777) == 0o444
    assert not (tmp_path / "gone-pod-0").exists()  # the files of a pod gone from the node
    assert collect_garbage(str(tmp_path), []) == ["u-1-0"]


def test_the_fault_build_is_used_only_under_a_shim_fault(tmp_path):
    from types import SimpleNamespace

    match = SimpleNamespace(cards=(0,), shares_gib=None, per_card_gib=2, pod_total_gib=2, uid="u-2", container_index=1)
    plugin = SimpleNamespace(
        cards=[SimpleNamespace(index=0, memory_gib=15)],
        native_host_dir="/n",
        containers_dir=str(tmp_path),
        kube=None,
        node="n1",
    )
    env, _ = registry.device_plugin(fault="leak-frees").container_environment(plugin, match)
    assert env["LD_PRELOAD"] == "/usr/local/gpushare/lib/libgpushare-shim-faults.so"
    assert "GPUSHARE_SHIM_FAULT=leak-frees\n" in (tmp_path / "u-2-1" / "limits").read_text()
    assert (tmp_path / "u-2-1" / "ld.so.preload").read_text() == "/usr/local/gpushare/lib/libgpushare-shim-faults.so\n"
