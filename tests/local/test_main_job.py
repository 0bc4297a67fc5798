"""The main job in the test command: ``gpushare-conformance run`` against the session's
local cluster, every check on four pytest-xdist workers, as the README runs it.

One cluster for all workers (the running one, kept up for the tests after this one),
each check placed on cards no concurrent check uses, the reports complete (verdicts
from every worker's reports). Every seed rule must PASS on the reference stack: the
rules the cluster cannot judge (a second GPU node) are the only ones left unjudged,
and only the rules of another kind of stack (DRA's own promises) are N/A. This test
holds the cluster to itself meanwhile.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from judged_runs import assert_evidence_only, run_cli, table, unplaced_checks

from gpushare_conformance.summary import INFO, NA, NOT_RUN, OPEN, PASS, SKIP, conformance_line

pytestmark = [pytest.mark.e2e]

MULTI_NODE_RULES = {"multi_node"}  # the local cluster has one GPU node
OTHER_STACKS_RULES = {"dra_consumable_capacity"}  # the reference stack allocates through the device plugin API


def test_the_main_job_passes_every_check_on_four_workers(cluster, placement, tmp_path):
    if cluster.provider != "local":
        pytest.skip("runs the main job against the local provider's cluster")
    from gpushare_conformance.fixtures.providers.local import LocalProvider

    apiserver = LocalProvider(state_dir=cluster.details["state_dir"]).procs.pid("kube-apiserver")
    assert apiserver
    child, result, report = run_cli(tmp_path, "main-job", ["--cluster", "local", "--keep-cluster", "--workers", "4"])
    assert_evidence_only(result)
    lines = table(result)
    broken = {r: (line.status, line.figure) for r, line in lines.items() if line.status not in (PASS, INFO, OPEN, NA)}
    unjudged = {r for r, (status, _) in broken.items() if status in (SKIP, NOT_RUN)}
    assert unjudged <= MULTI_NODE_RULES and set(broken) == unjudged, broken
    assert {r for r, line in lines.items() if line.status == NA} <= OTHER_STACKS_RULES, lines
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-2000:]
    assert conformance_line(list(lines.values())).startswith("conforms to the seed: yes")

    junit = ET.parse(report / "junit.xml").getroot()
    cases = [c for c in junit.iter("testcase") if c.find("skipped") is None]
    assert len(cases) > 40, f"only {len(cases)} checks ran"
    unplaced = unplaced_checks(junit)
    assert not unplaced, f"checks run without a placement: {unplaced}"
    # Verdicts come from every worker's reports, not from one process's memory.
    with_verdicts = {r.test.split("::")[-1].split("[")[0] for r in result.records}
    assert {
        "test_seed_job_gets_4gib_on_each_of_2_cards",
        "test_n_gib_over_m_cards_gives_n_over_m_on_each_card",
        "test_compute_is_shared_not_isolated",
    } <= with_verdicts, with_verdicts
    assert LocalProvider(state_dir=cluster.details["state_dir"]).procs.pid("kube-apiserver") == apiserver, (
        "the main job did not reuse the running cluster"
    )
