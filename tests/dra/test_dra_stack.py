"""The seed's rules under Dynamic Resource Allocation: the reference DRA driver judged
by the whole suite with the ``dra`` profile, and the suite catching its two faults.

The session's local cluster is switched to the DRA stack (manifests/overlays/dra:
gpushare-dra-plugin, its DeviceClass, kube-scheduler without extender;
tests/conftest.py puts the reference stack back at the end), then:

- ``gpushare-conformance run --cluster existing --stack dra -- --gpushare-mock-nvml``,
  as a user runs it against a DRA driver: every seed rule PASSes, on the same evidence
  as the extended-resource stacks (nvidia-smi and framework totals in the pod,
  allocation past the share refused, budgets, lifecycle, restrictions);
- each DRA fault (``gpushare-dra-plugin --fault``) deployed in turn, the checks that
  guard against it run in a child pytest: exactly those fail, showing the broken
  figure, and a control check the fault leaves alone passes.

    flock /tmp/gpushare-cluster.lock .venv/bin/python -m pytest tests/dra -q -p no:cacheprovider
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from judged_runs import assert_caught, assert_evidence_only, child_report_args, junit_outcomes, run_suite, table

from gpushare_conformance.fixtures.framework import stack, stacks
from gpushare_conformance.fixtures.framework.progress import progress_printer
from gpushare_conformance.fixtures.framework.timeouts import Timeouts
from gpushare_conformance.fixtures.framework.wait import poll_until
from gpushare_conformance.summary import INFO, NA, OPEN, PASS, SKIP, conformance_line
from gpushare_doubles import faults

pytestmark = [pytest.mark.e2e, pytest.mark.disruptive, pytest.mark.on_stack("dra")]

REPO = Path(__file__).resolve().parents[2]
FAULT_OVERLAYS = REPO / "manifests" / "overlays" / "faults"
DRA = stacks.STACKS["dra"]
# What a DRA stack has no part for: kube-scheduler itself places claims, so there is no
# extender to restart or to post a bind to: those rows are N/A, never PASS.
NOT_APPLICABLE = {"hostile_extender": "no scheduler extender to call (kube-scheduler places its claims)"}
# Rules that only a second GPU node can judge (the local cluster has one).
MULTI_NODE_RULES = ("multi_node",)
ISOLATION = "conformance/test_isolation.py"
DRA_CAPACITY = "conformance/test_dra_capacity.py"
SEED = "conformance/test_seed.py::test_seed_job_gets_4gib_on_each_of_2_cards"
CHILD_TIMEOUT_S = 900


def _sound_dra_stack(kube, progress) -> None:
    timeouts = Timeouts()
    kube.kubectl("apply", "-k", str(DRA.overlay), timeout=timeouts.apply)
    stacks.wait_stack(kube, DRA, timeouts, progress)


@pytest.fixture(scope="module")
def dra_faults(kube, pytestconfig):
    """The faults this module deployed. Each fault overlay is the whole DRA stack with one
    flag, so the next case's overlay replaces the last one's fault in one rollout; the
    sound DRA stack comes back once, when the module ends (also after a failure), or
    before a test that needs it."""
    applied: list[str] = []
    try:
        yield applied
    finally:
        if applied:
            _sound_dra_stack(kube, progress_printer(pytestconfig))


def test_every_seed_rule_passes_on_the_reference_dra_driver(cluster, switch, dra_faults, kube, tmp_path, pytestconfig):
    switch("dra")
    if dra_faults:  # a fault case ran first (a selection of this module's tests)
        _sound_dra_stack(kube, progress_printer(pytestconfig))
        dra_faults.clear()
    child, result = run_suite(cluster, tmp_path, "dra")
    assert_evidence_only(result)
    lines = table(result)
    for rule, words in NOT_APPLICABLE.items():
        assert lines[rule].status == NA and words in lines[rule].figure, (rule, lines[rule].status, lines[rule].figure)
    # The device plugin's restart judges the rule; the extender's is not applicable.
    assert lines["restarts_lose_nothing"].status == PASS, lines["restarts_lose_nothing"].figure
    judged = {r: (line.status, line.figure) for r, line in lines.items() if line.status not in (SKIP, "----", NA)}
    failed = {r: figure for r, (status, figure) in judged.items() if status not in (PASS, INFO, OPEN)}
    assert not failed, failed
    # The driver's own symbol table is beyond an interposition library: OPEN, with its figure, never PASS.
    assert lines["beyond_interposition"].status == OPEN, lines["beyond_interposition"].figure
    unjudged = {r: line.figure for r, line in lines.items() if line.status in (SKIP, "----")}
    assert set(unjudged) <= set(MULTI_NODE_RULES), unjudged
    assert child.returncode == 0, child.stdout[-3000:]
    assert conformance_line(list(lines.values())).startswith("conforms to the seed: yes"), child.stdout[-2000:]
    # The seed's Job: 8 GiB over 2 cards as two claims' requests of 4Gi, and the pod sees 4 GiB on each.
    assert lines["multi_gpu_share"].figure.startswith("2 cards x "), lines["multi_gpu_share"].figure
    # The integer rule, as DRA phrases it: 3 GiB over 2 cards is asked as 1536Mi per card.
    shares = [r for r in result.records if r.base_check == "per_card_share"]
    assert shares and all(r.passed for r in shares), shares
    assert all("DRA takes any quantity: asked 1536 MiB" in r.detail for r in shares), [r.detail for r in shares]


FAULT_CASES = {
    # Claims prepared without the shim: the pod sees the whole V100 though its claim
    # consumed 4 GiB of each card.
    faults.NO_ISOLATION: (
        {
            SEED: r"16160 MiB is the card's physical size",
            f"{ISOLATION}::test_allocation_up_to_share_succeeds_and_past_share_fails_out_of_memory": (
                r"16160 MiB is the card's physical size"
            ),
        },
        f"{ISOLATION}::test_node_advertising_matches_nvml_inventory",
    ),
    # Each card published with twice its memory: two claims' shares over-commit a card,
    # and the slice no longer matches what NVML reports.
    faults.OVERCOMMIT_CAPACITY: (
        {
            f"{ISOLATION}::test_two_pods_on_the_same_cards_each_see_their_share_and_never_exceed_a_card": (
                r"overbook.* was placed: on .*it is running on "
            ),
            f"{ISOLATION}::test_node_advertising_matches_nvml_inventory": r"advertised_gpu_mem.*120",
        },
        SEED,
    ),
    # Each container given the claim's request rounded down (1536Mi -> 1 GiB), not the
    # 2 GiB the allocation consumed under the device's 1 GiB steps.
    faults.REQUEST_NOT_CONSUMED: (
        {
            f"{DRA_CAPACITY}::test_consumable_capacity_keeps_its_promises": (
                r"container_gets_consumed\[share-[ab], card \d+\]: share-[ab]'s claim consumed 2048 MiB .*1024 MiB"
            ),
        },
        SEED,
    ),
}


@pytest.mark.parametrize("fault", sorted(FAULT_CASES))
def test_the_checks_catch_each_dra_fault(fault, cluster, switch, dra_faults, kube, tmp_path, pytestconfig):
    progress = progress_printer(pytestconfig)
    must_fail, control = FAULT_CASES[fault]
    switch("dra")
    timeouts = Timeouts()
    dra_faults.append(fault)
    kube.kubectl("apply", "-k", str(FAULT_OVERLAYS / f"dra-{fault}"), timeout=timeouts.apply)
    stacks.wait_stack(kube, DRA, timeouts, progress)
    said = f"FAULT INJECTED: gpushare-dra-plugin runs with --fault {fault}"
    # Ready is not logged yet: the line comes within moments of the process starting.
    log = poll_until(
        lambda: stack.component_log(kube, DRA.namespace, "app=gpushare-dra-plugin"),
        lambda text: said in text,
        timeout=timeouts.restart,
        what=f"the DRA plugin to say {said!r}",
    )
    assert said in log, log[-2000:]
    checks = [*must_fail, control]
    argv = [
        sys.executable,
        "-m",
        "pytest",
        *checks,  # one after another in one process, as the mutation cases run theirs
        "--gpushare-cluster",
        "existing",
        "--gpushare-cluster-kubeconfig",
        str(cluster.kubeconfig),
        "--gpushare-stack",
        "dra",
        "--gpushare-mock-nvml",
        *child_report_args(tmp_path),
    ]
    child = subprocess.run(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=CHILD_TIMEOUT_S
    )
    tail = child.stdout[-4000:]
    assert child.returncode == 1, f"checks under --fault {fault} exited {child.returncode}, wanted 1:\n{tail}"
    assert_caught(junit_outcomes(tmp_path / "junit.xml"), must_fail, control, fault, tail, progress)
