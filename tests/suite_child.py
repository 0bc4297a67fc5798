"""Run the whole suite as a user runs it, in a child process, against the session's
cluster, and read what it judged (tests/peers, tests/dra)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from gpushare_conformance.report import VERDICTS_FILE, VerdictFile, read_verdicts
from gpushare_conformance.summary import RuleLine, build_summary

# What only a second GPU node could show; anything else skipped is a defect of the suite.
CLUSTER_LACKS = re.compile(r"two or more GPU nodes|a mock GPU node whose driver the suite can reach")
# A check that failed on a Python error rather than on evidence.
EXCEPTION = re.compile(r"\b(ProfileError|KeyError|TypeError|AttributeError|IndexError|ValueError|Traceback)\b")
CHILD_TIMEOUT_S = 1500


def run_suite(cluster, tmp_path, profile: str) -> tuple[subprocess.CompletedProcess, object]:
    """``gpushare-conformance run`` against the running cluster, as a user would."""
    report = tmp_path / f"report-{profile}"
    argv = [
        sys.executable,
        "-m",
        "gpushare_conformance",
        "run",
        "--cluster",
        "existing",
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--stack",
        profile,
        "--report-dir",
        str(report),
        "--",
        "--gpushare-mock-nvml",
        "-p",
        "no:cacheprovider",
    ]
    env = {**os.environ, "COLUMNS": "160"}
    child = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, env=env)
    print(child.stdout[-6000:])
    verdicts = report / VERDICTS_FILE
    assert verdicts.is_file(), f"no {verdicts}: exit {child.returncode}\n{child.stdout[-3000:]}\n{child.stderr[-3000:]}"
    return child, read_verdicts(verdicts)


def assert_evidence_only(result: VerdictFile, also_lacking: str | None = None) -> None:
    """No check errored or failed on an exception, and skips are only for what the cluster
    lacks (``also_lacking``: a pattern of what else the stack itself has no part for)."""
    errors = {t: o.reason for t, o in result.outcomes.items() if o.outcome == "error"}
    assert not errors, errors
    crashes = {t: o.reason for t, o in result.outcomes.items() if o.outcome == "failed" and EXCEPTION.search(o.reason)}
    assert not crashes, crashes
    skips = {t: o.reason for t, o in result.outcomes.items() if o.outcome == "skipped"}
    lacking = re.compile(f"{CLUSTER_LACKS.pattern}|{also_lacking}") if also_lacking else CLUSTER_LACKS
    assert all(lacking.search(r) for r in skips.values()), skips


def table(result: VerdictFile) -> dict[str, RuleLine]:
    return {line.rule.id: line for line in build_summary(result)}
