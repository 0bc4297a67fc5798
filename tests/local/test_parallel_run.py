"""The checks in parallel (pytest-xdist) on the session's cluster: one cluster for all
workers, checks placed on cards no concurrent check uses, reports complete.

A child pytest runs a subset of the checks with three workers against the running
local cluster (kept up); this test holds the cluster to itself meanwhile.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

SUBSET = (
    "test_seed_job_gets_4gib_on_each_of_2_cards or 1GiBx2 or 3GiBx1 or 1GiBx4 "
    "or test_gpu_count_above_any_node_cards_is_not_scheduled or test_compute_is_shared_not_isolated"
)


@pytest.mark.e2e
def test_checks_run_in_parallel_on_one_cluster(cluster, placement, tmp_path):
    if cluster.provider != "local":
        pytest.skip("runs a child session against the local provider's cluster")
    from gpushare_conformance.fixtures.providers.local import LocalProvider

    apiserver = LocalProvider(state_dir=cluster.details["state_dir"]).procs.pid("kube-apiserver")
    assert apiserver
    junit, report = tmp_path / "junit.xml", tmp_path / "report"
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "gpushare_conformance.conformance",
        "-q",
        "-p",
        "no:cacheprovider",
        "-n",
        "3",
        "--gpushare-cluster",
        "local",
        "--gpushare-keep-cluster-up",
        "-k",
        SUBSET,
        "--junitxml",
        str(junit),
        "--gpushare-report-dir",
        str(report),
    ]
    child = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert child.returncode == 0, child.stdout[-5000:] + child.stderr[-2000:]
    cases = list(ET.parse(junit).iter("testcase"))
    assert len(cases) == 7, [c.get("name") for c in cases]  # "1GiBx2" also selects card-1GiBx2
    waits = {}
    for case in cases:
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert "gpushare.placement" in props, f"{case.get('name')} was not placed"
        waits[case.get("name")] = props["gpushare.placement"]
    # Verdicts come from every worker's reports, not from one process's memory.
    verdicts = json.loads((report / "verdicts.json").read_text())
    tests_with_verdicts = {v["test"].split("::")[-1].split("[")[0] for v in verdicts["verdicts"]}
    assert {
        "test_seed_job_gets_4gib_on_each_of_2_cards",
        "test_n_gib_over_m_cards_gives_n_over_m_on_each_card",
        "test_compute_is_shared_not_isolated",
    } <= tests_with_verdicts, tests_with_verdicts
    assert LocalProvider(state_dir=cluster.details["state_dir"]).procs.pid("kube-apiserver") == apiserver, (
        "the parallel run did not reuse the running cluster"
    )
