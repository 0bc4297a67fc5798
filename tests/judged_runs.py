"""Run the whole suite as a user runs it, in a child process, against the session's
cluster, and read what it judged (tests/peers, tests/dra)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from pathlib import Path

from gpushare_conformance.report import VERDICTS_FILE, VerdictFile, read_verdicts
from gpushare_conformance.summary import RuleLine, build_summary

# What only a second GPU node could show; anything else skipped is a defect of the suite.
# What a cluster may lack for a check to judge (the reason the check gives): a second GPU
# node, a mock node the suite can reach, a way for a pod to be given a dead process's pid
# (user and PID namespaces for the pod, or a pid_max small enough to cycle).
CLUSTER_LACKS = re.compile(
    r"two or more GPU nodes|a mock GPU node whose driver the suite can reach|no process could be given a dead one's pid"
)
# A check that failed on a Python error rather than on evidence.
EXCEPTION = re.compile(r"\b(ProfileError|KeyError|TypeError|AttributeError|IndexError|ValueError|Traceback)\b")
CHILD_TIMEOUT_S = 1500
# card_health for child runs on the mock stacks: ten times what a stack that reports a sick
# card needs there (NVML polled every 2 s, the node status posted within the second), so
# a stack blind to it is judged in 20 s rather than the 60 s a user's cluster is given.
MOCK_CARD_HEALTH_S = 20.0


def child_report_args(tmp_path: Path) -> list[str]:
    """The options of a child pytest that runs chosen checks (a fault case's): its report
    folder and JUnit file in ``tmp_path``, no cache, quiet."""
    return [
        "--gpushare-report-dir",
        str(tmp_path),
        "--junitxml",
        str(tmp_path / "junit.xml"),
        "-p",
        "no:cacheprovider",
        "-q",
    ]


def run_cli(tmp_path: Path, name: str, run_args: list[str]) -> tuple[subprocess.CompletedProcess, VerdictFile, Path]:
    """``gpushare-conformance run --report-dir <tmp_path>/report-<name> <run_args>`` in a
    child, as a user runs it; its output printed, its verdicts and its report folder."""
    report = tmp_path / f"report-{name}"
    argv = [sys.executable, "-m", "gpushare_conformance", "run", "--report-dir", str(report), *run_args]
    env = {**os.environ, "COLUMNS": "160"}
    child = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, env=env)
    print(child.stdout[-6000:])
    verdicts = report / VERDICTS_FILE
    assert verdicts.is_file(), f"no {verdicts}: exit {child.returncode}\n{child.stdout[-3000:]}\n{child.stderr[-3000:]}"
    return child, read_verdicts(verdicts), report


def run_suite(
    cluster, tmp_path, profile: str, timeouts: Mapping[str, float] | None = None
) -> tuple[subprocess.CompletedProcess, VerdictFile]:
    """The whole suite judging ``profile`` against the running cluster, through the
    ``existing`` provider with mocked NVML, as docs/suite.md runs a peer stack
    (``timeouts``: ``--gpushare-timeout`` overrides, as a user tunes a run)."""
    overrides = [arg for name, s in (timeouts or {}).items() for arg in ("--gpushare-timeout", f"{name}={s:g}")]
    child, result, _ = run_cli(
        tmp_path,
        profile,
        ["--cluster", "existing", "--kubeconfig", str(cluster.kubeconfig), "--stack", profile]
        + ["--", "--gpushare-mock-nvml", "-p", "no:cacheprovider", *overrides],
    )
    return child, result


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


def junit_outcomes(path: Path) -> dict[str, tuple[str, str]]:
    """Test id (``file.py::name[param]``) -> (outcome, failure text) from a JUnit XML file."""
    outcomes: dict[str, tuple[str, str]] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/") + ".py"
        test_id = f"{module}::{case.get('name')}"
        outcome, text = "passed", ""
        for kind in ("failure", "error", "skipped"):
            element = case.find(kind)
            if element is not None:
                outcome = {"failure": "failed"}.get(kind, kind)
                text = f"{element.get('message', '')}\n{element.text or ''}"
                break
        outcomes[test_id] = (outcome, text)
    return outcomes


def unplaced_checks(junit: ET.Element) -> list[str]:
    """The checks of a run's JUnit that ran without a placement (every check of a
    parallel run must ask for its cards: fixtures/framework/placement.py)."""
    return [
        case.get("name", "")
        for case in junit.iter("testcase")
        if case.find("skipped") is None
        and not any(p.get("name") == "gpushare.placement" for p in case.iter("property"))
    ]


def assert_caught(
    outcomes: dict[str, tuple[str, str]],
    must_fail: Mapping[str, str],
    control: str,
    fault: str,
    tail: str,
    progress: Callable[[str], None],
) -> None:
    """Exactly the checks of ``must_fail`` failed, each showing its pattern (the broken
    figure), and the control the fault leaves alone passed."""
    checks = [*must_fail, control]
    assert set(outcomes) == set(checks), f"the child ran {sorted(outcomes)}, asked for {checks}"
    failed = sorted(t for t, (outcome, _) in outcomes.items() if outcome == "failed")
    assert failed == sorted(must_fail), f"under --fault {fault} these failed: {failed}\n{tail}"
    assert outcomes[control][0] == "passed", (
        f"control {control} is {outcomes[control][0]} under --fault {fault}:\n{outcomes[control][1][-2000:]}"
    )
    for check, shows in must_fail.items():
        text = outcomes[check][1]
        assert re.search(shows, text, re.S), f"{check} failed, but not showing /{shows}/:\n{text[-3000:]}"
        progress(f"--fault {fault} caught by {check.split('::', 1)[1]}: {text.strip().splitlines()[0][:300]}")
