"""The checks catch broken stacks: deploy a faulty stack, run the checks guarding
against that fault, and see exactly those fail with the broken figure in the message.

Each case applies ``manifests/overlays/faults/<fault>`` (the mock stack plus one
``--fault`` flag, see ``gpushare_doubles/faults.py``) on the session's cluster (local,
or kind for the case that needs two GPU nodes; the test command shares the cases
between its local and kind streams: tests/mutation_shares.py),
runs the chosen checks in a child pytest (as a user would), reads its JUnit XML, and
puts the sound stack back once the cases are done, also when one fails. A control
check that the fault does not touch must still pass, so a stack broken everywhere
(or a check failing for an unrelated reason) does not count as caught.

    .venv/bin/python -m pytest tests/mutation -q -p no:cacheprovider --gpushare-keep-cluster-up
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from judged_runs import MOCK_CARD_HEALTH_S, assert_caught, child_report_args, junit_outcomes
from kubernetes.client.exceptions import ApiException

from gpushare_conformance.fixtures.framework import deploy, stack
from gpushare_conformance.fixtures.framework.kube import Kube
from gpushare_conformance.fixtures.framework.progress import progress_printer
from gpushare_conformance.fixtures.framework.timeouts import Timeouts
from gpushare_conformance.fixtures.framework.wait import poll_until
from gpushare_conformance.profiles import PROFILES
from gpushare_doubles import faults
from gpushare_stack import contract

pytestmark = [pytest.mark.e2e, pytest.mark.mutation, pytest.mark.disruptive]

REPO = Path(__file__).resolve().parents[2]
FAULT_OVERLAYS = REPO / "manifests" / "overlays" / "faults"
NAMESPACE = deploy.STACK_NAMESPACE
CHILD_TIMEOUT_S = 900

SEED = "conformance/test_seed.py::test_seed_job_gets_4gib_on_each_of_2_cards"
GRID = "conformance/test_grid.py::test_n_gib_over_m_cards_gives_n_over_m_on_each_card"
RESTRICTIONS = "conformance/test_restrictions.py"
ISOLATION = "conformance/test_isolation.py"
BUDGET = "conformance/test_budget.py"
BURST = "conformance/test_burst.py"
SICK_CARD = "conformance/test_sick_card.py"
MULTINODE = "conformance/test_multinode.py"
HOSTILE = "conformance/test_hostile.py"
ISOLATION_FILES = "conformance/test_isolation_files.py"


@dataclass(frozen=True)
class Case:
    """A fault, the checks that must fail (check -> what the failure must show), and
    a control check the fault leaves alone (must pass)."""

    fault: str
    component: str  # the program taking --fault; its pods are labelled app=<component>
    must_fail: dict[str, str]
    control: str
    gpu_nodes: int = 1  # GPU nodes the cluster needs for the checks to see the fault


CASES = [
    Case(
        faults.UNEVEN_SPLIT,
        "gpushare-extender",
        {
            # 8 GiB over 2 cards written as 5 + 3: the first card shows 5120 MiB.
            SEED: r"card_total: 5120 MiB exceeds the 4 GiB share",
            # 6 GiB over 2 cards written as 4 + 2: the first card shows 4096 MiB.
            f"{GRID}[3GiBx2]": r"card_total: 4096 MiB exceeds the 3 GiB share",
        },
        control=f"{GRID}[3GiBx1]",  # one card: nothing to split unevenly
    ),
    Case(
        faults.IGNORE_INTEGER_RULE,
        "gpushare-extender",
        {
            # 3 GiB over 2 cards is bound with 1 GiB per card instead of left Pending; the
            # kubelet then admits it and the (sound) device plugin refuses the 1 + 1 split.
            f"{RESTRICTIONS}::test_gpu_mem_not_divisible_by_gpu_count_is_not_scheduled": r"not-integer.* was placed: .*UnexpectedAdmissionError.*\{\d+: 1, \d+: 1\}",
        },
        control=f"{RESTRICTIONS}::test_gpu_count_above_any_node_cards_is_not_scheduled",
    ),
    Case(
        faults.NO_ISOLATION,
        "gpushare-device-plugin",
        {
            # Without the shim the container sees the whole card (16160 MiB on a V100,
            # 15360 MiB on kind's T4), the check's message naming it the physical size.
            SEED: r"card_total: (\d+) MiB is the card's physical size or more \(\1 MiB\)",
            f"{ISOLATION}::test_allocation_up_to_share_succeeds_and_past_share_fails_out_of_memory": r"card_total: (\d+) MiB is the card's physical size or more \(\1 MiB\)",
        },
        control=f"{ISOLATION}::test_node_advertising_matches_nvml_inventory",
    ),
    Case(
        faults.PER_PROCESS_BUDGET,
        "gpushare-device-plugin",
        {
            # Each process gets the whole 2 GiB: the second one is granted the rest plus 1 MiB.
            f"{BUDGET}::test_second_process_of_a_container_gets_only_what_the_first_left": r"second_process_past_budget\[first holds 512 MiB \+ asks 1537 MiB > budget 2048 MiB\].*exit 0",
            # The child sees the share less only its own context free while its parent holds 512 MiB.
            f"{BUDGET}::test_child_of_a_process_using_the_card_sees_the_same_share_and_budget": r"child_free_after_parent: the child's free while its parent holds 512 of 2048 MiB: (?!1536 )\d+ MiB exceeds 1536",
        },
        control=f"{BUDGET}::test_memory_freed_in_a_process_comes_back_every_time",
    ),
    Case(
        faults.LEAK_FREES,
        "gpushare-device-plugin",
        {
            # The first free is never credited: the second cycle finds no room.
            f"{BUDGET}::test_memory_freed_in_a_process_comes_back_every_time": r"alloc_free_cycles\[20 x \d+ MiB of 2048 MiB\].*CUDA_ERROR_OUT_OF_MEMORY .*cycle 2 of 20",
        },
        control=f"{BUDGET}::test_memory_of_a_killed_process_comes_back",
    ),
    Case(
        faults.NO_RECLAIM,
        "gpushare-device-plugin",
        {
            # What the SIGKILLed holder held (the share less its context) stays counted.
            f"{BUDGET}::test_memory_of_a_killed_process_comes_back": r"reclaimed_after_sigkill\[(\d+) MiB of 2048 MiB after the holder of \1 MiB was killed\].*CUDA_ERROR_OUT_OF_MEMORY",
        },
        control=f"{BUDGET}::test_memory_freed_in_a_process_comes_back_every_time",
    ),
    Case(
        faults.UNGUARDED_MANAGED,
        "gpushare-device-plugin",
        {
            # cuMemAllocManaged goes past the 1 GiB share; the failure names the path.
            f"{ISOLATION}::test_every_allocation_path_is_held_to_the_share[managed]": r"alloc_past_share_oom\[--api managed\]: 1025 MiB by managed \(shown 1024 MiB\) granted \(exit 0\)",
        },
        control=f"{ISOLATION}::test_every_allocation_path_is_held_to_the_share[alloc]",
    ),
    Case(
        faults.EXACT_FIT_REFUSED,
        "gpushare-device-plugin",
        {
            # The allocation that would fill the share to the byte is refused.
            f"{ISOLATION}::test_all_that_a_process_is_told_is_free_can_be_allocated": r"alloc_all_told_free\[1 allocation\(s\)\]: all a process is told is free .*: exit 2: alloc \d+ bytes \(piece 1 of 1.* CUDA_ERROR_OUT_OF_MEMORY",
        },
        # 64 MiB short of what it is told is free, and one MiB past the share: unchanged.
        control=f"{ISOLATION}::test_every_allocation_path_is_held_to_the_share[alloc]",
    ),
    Case(
        faults.SMI_IGNORES_USAGE,
        "gpushare-device-plugin",
        {
            # nvidia-smi shows nothing used while another process holds half the share.
            f"{BUDGET}::test_another_process_sees_what_a_working_process_holds": r"smi_used_while_held: nvidia-smi's used while another process holds 1024 of 2048 MiB: 0 MiB",
        },
        # cuMemGetInfo still counts what the first process holds.
        control=f"{BUDGET}::test_second_process_of_a_container_gets_only_what_the_first_left",
    ),
    Case(
        faults.ORDINAL_CARDS,
        "gpushare-device-plugin",
        {
            # The rank of card 1 is charged on card 0: the rank of card 0 finds its share taken.
            f"{ISOLATION}::test_a_process_narrowed_to_one_card_is_charged_on_that_card": r"narrowed_rank_gets_its_card: \d+ MiB by the rank of card 0 while the rank of card 1 holds \d+ MiB: exit 2: .*CUDA_ERROR_OUT_OF_MEMORY",
        },
        # Processes that see both cards: CUDA's ordinals are the container's cards.
        control=f"{ISOLATION}::test_allocation_up_to_share_succeeds_and_past_share_fails_out_of_memory",
    ),
    Case(
        faults.LOADER_UNHELD,
        "gpushare-device-plugin",
        {
            # A library opened with RTLD_DEEPBIND reaches the driver's own cuMemAlloc_v2.
            f"{HOSTILE}::test_a_loader_trick_lifts_no_share[deepbind]": r"loader_trick_past_share: 1025 MiB on a 1024 MiB share through a library opened with RTLD_DEEPBIND .*granted \(exit 0\)",
        },
        # The C library's dlsym fetched by version: still answered by the shim's.
        control=f"{HOSTILE}::test_a_loader_trick_lifts_no_share[dlvsym]",
    ),
    Case(
        faults.STREAM_CURRENT_CARD,
        "gpushare-device-plugin",
        {
            # Charged to card 0, taken on card 1: past card 1's full share.
            f"{HOSTILE}::test_a_stream_of_another_card_is_charged_to_that_card": r"stream_card_past_share: 64 MiB on a stream of card 1 while card 0 is current, .* granted \(exit 0\)",
        },
        control=f"{ISOLATION}::test_every_allocation_path_is_held_to_the_share[async]",
    ),
    Case(
        faults.CONTEXTS_UNCHARGED,
        "gpushare-device-plugin",
        {
            # Every process's context comes on top of the share.
            f"{HOSTILE}::test_a_pods_processes_take_no_more_of_the_card_than_its_share": r"processes_within_share: 8 of 8 processes of the pod holding a context, .*: \d+ MiB of card \d+ for a 1024 MiB share",
        },
        control=f"{HOSTILE}::test_a_loader_trick_lifts_no_share[dlmopen]",
    ),
    Case(
        faults.VMM_RELEASE_FREES,
        "gpushare-device-plugin",
        {
            # The share comes back at cuMemRelease: the memory still mapped is taken twice.
            f"{ISOLATION}::test_memory_still_mapped_stays_charged_after_its_handle_is_released": r"mapped_memory_held\[two mappings\]: \d+ MiB by cuMemAlloc_v2 \(mapped twice, handle released: alloc \d+ MiB granted\); holding \d+ MiB",
        },
        # The virtual-memory path, unmapped before release as usual, is still held.
        control=f"{ISOLATION}::test_every_allocation_path_is_held_to_the_share[vmm]",
    ),
    Case(
        faults.EXEC_KEEPS_CHARGE,
        "gpushare-device-plugin",
        {
            # The program started by exec finds the charge of the one it replaced.
            f"{BUDGET}::test_a_program_started_by_exec_can_take_the_whole_share": r"reclaimed_after_exec\[\d+ MiB of \d+ MiB after exec of the holder of \d+ MiB\]: \d+ MiB by the program pid \d+ became, after it held \d+ MiB: exit 2: .*CUDA_ERROR_OUT_OF_MEMORY",
        },
        # A killed process's memory still comes back (the kernel drops its locks).
        control=f"{BUDGET}::test_memory_of_a_killed_process_comes_back",
    ),
    Case(
        faults.SHARED_ACCOUNTING,
        "gpushare-device-plugin",
        {
            # One accounting file for the node: each pod's processes lock the same
            # units, so what one pod holds is taken from the other's share.
            f"{ISOLATION}::test_pods_on_one_card_hold_their_shares_at_once_and_touch_no_other_budget": r"pod_budget_untouched\[budget-b, budget-a holding\]: budget-b's \d+ MiB \(half its \d+ MiB\) while budget-a holds \d+ of \d+ MiB: exit 2: .*CUDA_ERROR_OUT_OF_MEMORY",
        },
        # One pod alone: its processes share a budget as they should.
        control=f"{BUDGET}::test_second_process_of_a_container_gets_only_what_the_first_left",
    ),
    Case(
        faults.ISOLATION_FILES_WRITABLE,
        "gpushare-device-plugin",
        {
            # The limits file and the preload list are mounted read-write: the
            # container's root opens them for writing.
            f"{ISOLATION_FILES}::test_the_files_the_isolation_runs_from_are_out_of_the_pods_reach": r"isolation_files_read_only: granted \d+ of \d+ operations on \d+ paths .*: (write|truncate|chmod) /etc/(gpushare/limits|ld\.so\.preload) as uid 0",
        },
        # Its limits still hold: a pod is refused past its share.
        control=f"{ISOLATION}::test_every_allocation_path_is_held_to_the_share[alloc]",
    ),
    Case(
        faults.TWINS_AT_ONCE,
        "gpushare-extender",
        {
            # Pods created together are bound at once, a later-assumed twin's Binding
            # just before an earlier one's (gpushare_doubles/twin_pairs.py): the kubelet
            # admits the later twin while the earlier is bound, and the device plugin
            # serves it the earlier twin's cards. The check's whole-card twins, created
            # at once, sit one per card, so any confusion shows: caught in the first of
            # its 3 rounds in 9 runs of 9 on the local cluster, 7 of them with both cores
            # kept busy (random bind delays instead were missed on a busy machine).
            f"{BURST}::test_a_burst_that_fills_a_node_runs_and_overbooks_no_card": r"pod_sees_its_cards\[(?:burst|twin-\d)-\d+\]: (?:burst|twin-\d)-\d+ was recorded on card\(s\) \d+; nvidia-smi in it shows: \['GPU-[0-9a-f-]+'\], want \['GPU-[0-9a-f-]+'\]",
        },
        # Pods created one at a time: nothing else waits to be matched.
        control=f"{ISOLATION}::test_every_allocation_path_is_held_to_the_share[alloc]",
    ),
    Case(
        faults.BLIND_TO_HEALTH,
        "gpushare-device-plugin",
        {
            # The device plugin never looks at NVML again: a card that falls off the bus
            # stays Healthy, so the node goes on advertising it.
            f"{SICK_CARD}::test_a_card_that_falls_off_the_bus_leaves_the_node_and_gets_no_pod": r"lost_card_not_advertised: advertised by \S+ as before card \d+ was lost, \d+ s on.*aliyun\.com/gpu-mem",
        },
        # The node's advertising of its healthy cards is right.
        control=f"{ISOLATION}::test_node_advertising_matches_nvml_inventory",
    ),
    Case(
        faults.IGNORES_XIDS,
        "gpushare-device-plugin",
        {
            # The device plugin takes every Xid for an application's: a card with a
            # double-bit ECC error stays Healthy, so the node goes on advertising it.
            f"{SICK_CARD}::test_a_card_with_a_critical_xid_leaves_the_node_and_gets_no_pod": r"xid_card_not_advertised: advertised by \S+ as before Xid 48 on card \d+, \d+ s on.*aliyun\.com/gpu-mem",
        },
        # A card that falls off the bus still leaves: only the Xid is ignored.
        control=f"{SICK_CARD}::test_a_card_that_falls_off_the_bus_leaves_the_node_and_gets_no_pod",
    ),
    Case(
        faults.SCHEDULE_NOTHING,
        "gpushare-extender",
        {
            # Every GPU pod is turned away with a reason naming every rule: only the
            # positive control (a pod that keeps the rule is placed) tells it apart.
            f"{RESTRICTIONS}::test_gpu_mem_not_divisible_by_gpu_count_is_not_scheduled": r"positive_control: integer \(2 GiB over 2 card\(s\), N/M an integer\) did not run, so a refusal would prove nothing",
            f"{RESTRICTIONS}::test_gpu_count_above_any_node_cards_is_not_scheduled": r"positive_control: all-cards .* did not run, so a refusal would prove nothing",
            f"{RESTRICTIONS}::test_per_card_share_above_card_size_is_not_scheduled": r"positive_control: whole-card .* did not run, so a refusal would prove nothing",
        },
        control=f"{ISOLATION}::test_node_advertising_matches_nvml_inventory",
    ),
    Case(
        faults.STALE_VIEW,
        "gpushare-extender",
        {
            # Binds of the burst overlap and each picks from a view without the others.
            f"{BURST}::test_a_burst_that_fills_a_node_runs_and_overbooks_no_card": r"card_booked\[card \d+\]: card \d+ of \d+ GiB booked by .* GiB exceeds \d+ GiB",
        },
        control=f"{RESTRICTIONS}::test_gpu_count_above_any_node_cards_is_not_scheduled",
    ),
    Case(
        faults.READY_BEFORE_SYNCED,
        "gpushare-extender",
        {
            # Ready once the nodes are listed: the burst right after the restart is placed
            # from a view without the pods that ran before it.
            f"{BURST}::test_a_burst_right_after_an_extender_restart_books_no_card_twice": r"booked_after_restart\[card \d+\]: card \d+ of \d+ GiB booked by .*before-\d+=\d+.*after-\d+=\d+.* GiB exceeds \d+ GiB",
        },
        # No restart: the view it serves from holds what it bound itself.
        control=f"{ISOLATION}::test_every_allocation_path_is_held_to_the_share[alloc]",
    ),
    Case(
        faults.OPEN_TO_STALLS,
        "gpushare-extender",
        {
            # Reachable at the node's address, 16 connections, no deadline: a pod holding
            # 300 leaves fresh connections unanswered.
            "conformance/test_bypass.py::test_a_pod_holding_connections_open_cannot_stall_the_extender": r"extender_answers_while_held: .*fresh connections answered \d+ of \d+ \(\S+ no answer in 5s",
        },
        control=f"{RESTRICTIONS}::test_gpu_count_above_any_node_cards_is_not_scheduled",
    ),
    Case(
        faults.FAILED_PODS_HOLD,
        "gpushare-extender",
        {
            # The Failed pod's whole cards stay booked: the pod after it is never placed.
            "conformance/test_lifecycle.py::test_capacity_returns_after_a_pod_ends_any_way[failed]": r"capacity_returned: .*was Failed .*, on nowhere",
            # Killed past its memory limit: reported OOMKilled, or (when the runtime missed
            # the cgroup's OOM event, as kind's nested containerd on cgroups v1 now and then
            # does) the SIGKILL's exit code 137 with reason Error.
            "conformance/test_lifecycle.py::test_capacity_returns_after_a_pod_ends_any_way[oom-killed]": r"capacity_returned: .*(OOMKilled|exit code 137).*, on nowhere",
        },
        control="conformance/test_lifecycle.py::test_capacity_returns_after_a_pod_ends_any_way[evicted]",
    ),
    Case(
        faults.CARDS_ACROSS_NODES,
        "gpushare-extender",
        {
            # One card with the share free on each of two nodes "makes" two: the pod is
            # bound with one card (or admitted nowhere), never left Pending.
            f"{MULTINODE}::test_m_cards_free_only_across_nodes_stay_pending_never_split": r"across-nodes .*was placed: |not_split|not_bound",
            # More cards than any node has, fewer than the nodes together: bound all the same.
            f"{RESTRICTIONS}::test_gpu_count_above_any_node_cards_is_not_scheduled": r"too-many-cards .*was placed: ",
        },
        control=f"{RESTRICTIONS}::test_gpu_mem_not_divisible_by_gpu_count_is_not_scheduled",
        gpu_nodes=2,
    ),
]


# What the reference stack's components log once they serve (gpushare_stack: the
# extender's and the device plugin's start-up lines).
SERVING_LINES = {"app=gpushare-extender": "serving on", "app=gpushare-device-plugin": "registered aliyun.com/gpu-mem"}


def _serving_logs(kube: Kube, selector: str) -> list[str]:
    """The component's live pods' logs; none yet while a new container has not started."""
    try:
        return list(stack.component_logs(kube, NAMESPACE, selector).values())
    except ApiException:
        return []


def apply_stack(kube: Kube, overlay: Path) -> None:
    """``kubectl apply -k`` an overlay and wait until it serves: the rollouts done, each
    new component pod logging that it serves, and the node advertising gpu-mem again."""
    profile, timeouts = PROFILES["reference"], Timeouts()
    kube.kubectl("apply", "-k", str(overlay), timeout=timeouts.apply)
    deploy.wait_rollouts(kube, NAMESPACE, timeouts.restart, progress=lambda _msg: None)
    # A finished rollout and the node's allocatable prove little: the new pods may not
    # have logged a line yet, and the node object keeps the old plugin's figure until the
    # kubelet reports again. Wait for each new process to say it serves.
    # (The suite itself never reads a stack's log: this harness knows its own stack.)
    for selector, line in SERVING_LINES.items():
        poll_until(
            lambda selector=selector: _serving_logs(kube, selector),
            lambda logs, line=line: bool(logs) and all(line in text for text in logs),
            timeout=timeouts.restart,
            what=f"{selector} pods to log {line!r}",
        )
    deploy.wait_gpu_nodes(kube, profile.node_resources[0], timeouts.stack_ready, progress=lambda _msg: None)


@pytest.fixture(scope="module")
def sound_stack_at_the_end(kube):
    """The sound stack comes back once this module's cases are done, also when one
    failed. Each fault overlay is the whole mock stack with one flag, so a case's
    overlay replaces the last case's fault in the same rollout: no sound stack is
    rolled out in between."""
    faulted: list[str] = []
    try:
        yield faulted
    finally:
        if faulted:
            apply_stack(kube, deploy.MOCK_OVERLAY)


@pytest.fixture
def faulty_stack(kube, suite_options, placement, sound_stack_at_the_end):
    """Deploy the fault overlay named by the case (while the case holds the cluster)."""
    if suite_options.cluster not in ("local", "kind"):
        pytest.skip(
            f"the fault overlays build on the mock stack of --gpushare-cluster local or kind, not {suite_options.cluster}"
        )

    def deploy_fault(fault: str) -> None:
        if not sound_stack_at_the_end:
            # Every node's device plugin rolls out at once rather than one node after
            # another (kind has two GPU nodes): a field the manifests leave unset, so each
            # ``kubectl apply -k`` keeps it.
            kube.kubectl(
                "-n",
                NAMESPACE,
                "patch",
                "daemonset",
                "gpushare-device-plugin",
                "--type=merge",
                "-p",
                '{"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "100%"}}}}',
            )
        sound_stack_at_the_end.append(fault)
        apply_stack(kube, FAULT_OVERLAYS / fault)

    return deploy_fault


@pytest.mark.parametrize("case", CASES, ids=[c.fault for c in CASES])
def test_checks_fail_on_a_stack_with_the_fault(
    case: Case, cluster, faulty_stack, kube, suite_options, tmp_path, pytestconfig
):
    progress = progress_printer(pytestconfig)
    gpu_nodes = [n for n in kube.core.list_node().items if (n.status.allocatable or {}).get(contract.RESOURCE_MEM)]
    if len(gpu_nodes) < case.gpu_nodes:
        pytest.skip(
            f"--fault {case.fault} shows only on {case.gpu_nodes} GPU nodes; the cluster has {len(gpu_nodes)} "
            "(tests/kind runs this case on kind's two GPU workers)"
        )
    faulty_stack(case.fault)
    logs = stack.component_logs(kube, NAMESPACE, f"app={case.component}")
    assert logs, f"no live pod of {case.component}"
    for pod, log in logs.items():
        assert f"FAULT INJECTED: {case.component} runs with --fault {case.fault}" in log, (
            f"{case.component} ({pod}) does not announce --fault {case.fault}; its log:\n{log[-2000:]}"
        )

    checks = [*case.must_fail, case.control]
    # The checks one after another in one process: a case's few checks are short or must
    # run alone, so xdist's workers (about 1 s of CPU and 2 s of wall each to start) cost
    # more than running side by side saves (docs/suite.md, "Where the test command's time goes").
    argv = [
        sys.executable,
        "-m",
        "pytest",
        *checks,
        "--gpushare-cluster",
        suite_options.cluster,
        "--gpushare-keep-cluster-up",
        *child_report_args(tmp_path),
        # A stack blind to a sick card is caught when card_health runs out.
        "--gpushare-timeout",
        f"card_health={MOCK_CARD_HEALTH_S:g}",
    ]
    if suite_options.mock_inventory is not None:
        argv += ["--gpushare-mock-inventory", str(suite_options.mock_inventory)]
    if suite_options.kind_binary:
        argv += ["--gpushare-kind-binary", str(suite_options.kind_binary)]
    if suite_options.kind_cluster:
        argv += ["--gpushare-kind-cluster", suite_options.kind_cluster]
    child = subprocess.run(
        argv,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    tail = child.stdout[-4000:]
    assert child.returncode == 1, f"checks under --fault {case.fault} exited {child.returncode}, wanted 1:\n{tail}"

    assert_caught(junit_outcomes(tmp_path / "junit.xml"), case.must_fail, case.control, case.fault, tail, progress)
