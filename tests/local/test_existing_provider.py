"""The path users take on real GPU clusters: `--gpushare-cluster existing` against a cluster that
already runs a stack. Here that cluster is the session's local one (stack deployed by
its provider); the checks run in a child pytest through the existing provider, which
deploys nothing and must find its NVML truth on the node itself (nvidia-smi in the
device plugin's pod, or a pod asking the container toolkit for every card).
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

CHECKS = (
    "test_node_advertising_matches_nvml_inventory or test_seed_job_gets_4gib_on_each_of_2_cards "
    "or test_gpu_mem_not_divisible_by_gpu_count_is_not_scheduled"
)


@pytest.mark.e2e
def test_checks_pass_through_the_existing_provider(cluster, placement, tmp_path):
    """Runs alone (no capacity declared): the child's checks use the same cards."""
    if cluster.provider != "local":
        pytest.skip("needs a cluster this session brought up with the stack deployed")
    junit = tmp_path / "junit.xml"
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "gpushare_conformance.conformance",
        "-q",
        "-p",
        "no:cacheprovider",
        "--gpushare-cluster",
        "existing",
        "--gpushare-cluster-kubeconfig",
        str(cluster.kubeconfig),
        "--gpushare-mock-nvml",
        "-k",
        CHECKS,
        "--junitxml",
        str(junit),
        "--gpushare-report-dir",
        str(tmp_path / "report"),
    ]
    child = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    cases = {c.get("name"): c for c in ET.parse(junit).iter("testcase")} if junit.is_file() else {}
    failed = {
        name: (c.find("failure") if c.find("failure") is not None else c.find("error"))
        for name, c in cases.items()
        if c.find("failure") is not None or c.find("error") is not None
    }
    assert child.returncode == 0, "\n".join(f"{n}: {(e.get('message') or '')[:1500]}" for n, e in failed.items()) or (
        child.stdout[-3000:] + child.stderr[-2000:]
    )
    assert len(cases) == 3, sorted(cases)
    for name, case in cases.items():
        assert case.find("skipped") is None and case.find("failure") is None and case.find("error") is None, name
