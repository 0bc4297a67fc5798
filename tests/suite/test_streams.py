"""The test command's streams (tests/conftest.py): which cluster runs each test, and what
the test command leaves to a child of another test."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import mutation_shares

REPO = Path(__file__).resolve().parents[2]
# tests/conftest.py by its path: ``conftest`` here is tests/suite's own.
_spec = importlib.util.spec_from_file_location("tests_conftest", REPO / "tests" / "conftest.py")
streams = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(streams)
KIND_CLUSTER, LOCAL_CLUSTER, PEER_CLUSTER, stream_of = (
    streams.KIND_CLUSTER,
    streams.LOCAL_CLUSTER,
    streams.PEER_CLUSTER,
    streams.stream_of,
)
MUTATION = mutation_shares.MUTATION


def test_each_cluster_test_belongs_to_its_clusters_stream():
    assert stream_of("tests/kind/test_kind_suite.py::test_suite_passes_on_kind_with_two_gpu_workers") == KIND_CLUSTER
    assert stream_of("tests/peers/test_peer_verdicts.py::test_x") == PEER_CLUSTER
    assert stream_of("tests/dra/test_dra_stack.py::test_x") == LOCAL_CLUSTER
    assert stream_of(f"{MUTATION}::test_checks_fail_on_a_stack_with_the_fault[no-isolation]") == LOCAL_CLUSTER
    assert stream_of("tests/suite/test_placement.py::test_x") is None
    # The fault switches' unit tests touch no cluster: they need not wait for the local stream.
    assert stream_of("tests/mutation/test_fault_switches.py::test_blind_to_health_keeps_a_lost_card_healthy") is None


def _collected(*args: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [line for line in result.stdout.splitlines() if "::" in line]


def _cases(nodeids: list[str]) -> list[str]:
    return sorted(f for f in map(mutation_shares.case_of, nodeids) if f is not None)


def test_the_test_command_splits_the_mutation_cases_between_the_local_and_kind_streams():
    """Every fault overlay (but the DRA driver's, tests/dra) is a mutation case; the test
    command runs each once: the local stream's share in that stream, every other case in
    tests/kind's child (which deselects the local share). Named on the command line,
    tests/mutation keeps them all."""
    overlays = mutation_shares.mutation_faults()
    named = _cases(_collected("tests/mutation"))
    assert named == overlays, f"the mutation cases are not the fault overlays: {named} != {overlays}"
    assert mutation_shares.ON_LOCAL < set(overlays), sorted(mutation_shares.ON_LOCAL - set(overlays))
    assert "cards-across-nodes" not in mutation_shares.ON_LOCAL  # two GPU nodes: only kind has them
    default = _collected()
    assert _cases(default) == sorted(mutation_shares.ON_LOCAL), _cases(default)
    assert {stream_of(n) for n in default if mutation_shares.case_of(n)} == {LOCAL_CLUSTER}
    assert any(n.startswith("tests/kind/test_kind_suite.py::test_checks_catch_the_kind_share") for n in default)
    assert _cases(mutation_shares.local_share()) == sorted(mutation_shares.ON_LOCAL)
    # What tests/kind's child collects: the rest.
    kind = _cases(_collected(MUTATION, *(f"--deselect={n}" for n in mutation_shares.local_share())))
    assert kind == sorted(set(overlays) - mutation_shares.ON_LOCAL), kind


def test_each_stream_runs_each_stacks_tests_together_so_it_switches_once_per_stack():
    """In the test command's order, the local stream's tests on the reference stack come
    first, then the DRA driver's (tests/conftest.py ON_STACK_ORDER); the peers' stream
    runs the gpushare-like flavor's tests, then the hami-like one's: a stack a stream
    left is never switched to again."""
    collected = _collected()
    stack_of = {
        "tests/dra/": "dra",
        "tests/peers/test_peer_stacks_deploy.py::test_gpushare_like": "gpushare-like",
        "tests/peers/test_peer_verdicts.py::test_gpushare_like": "gpushare-like",
        "tests/peers/test_peer_stacks_deploy.py::test_hami_like": "hami-like",
        "tests/peers/test_peer_verdicts.py::test_hami_like": "hami-like",
    }

    def switches(stream: str) -> tuple[list[str], list[str]]:
        tests = [n for n in collected if stream_of(n) == stream]
        order = [next((s for prefix, s in stack_of.items() if n.startswith(prefix)), "reference") for n in tests]
        return [s for i, s in enumerate(order) if i == 0 or order[i - 1] != s], order

    local, _ = switches(LOCAL_CLUSTER)
    assert local == ["reference", "dra"], f"the local stream switches stacks in the order {local}"
    peers, order = switches(PEER_CLUSTER)
    assert peers == ["gpushare-like", "hami-like"], f"the peers' stream switches stacks in the order {peers}"
    assert order.count("gpushare-like") == order.count("hami-like") == 2, order
