"""`gpushare-conformance run`'s exit statuses, and an infrastructure error judging nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpushare_conformance import cli, exitcodes, summary
from gpushare_conformance.report import CheckOutcome, VerdictFile

CHECKS = """
import pytest

@pytest.mark.parametrize("n", range(6))
def test_check(cluster, n):
    pass
"""


@pytest.mark.parametrize(
    ("status", "infrastructure", "code"),
    [
        (0, False, exitcodes.CONFORMS),
        (1, False, exitcodes.RULE_FAILED),
        (2, False, exitcodes.INTERRUPTED),
        (3, False, exitcodes.INTERNAL),
        (4, False, exitcodes.USAGE),
        (5, False, exitcodes.USAGE),
        (1, True, exitcodes.INFRASTRUCTURE),
        (3, True, exitcodes.INFRASTRUCTURE),
    ],
)
def test_pytest_status_maps_to_distinct_codes(status, infrastructure, code):
    assert exitcodes.from_pytest(status, infrastructure) == code
    assert len({exitcodes.CONFORMS, exitcodes.RULE_FAILED, exitcodes.USAGE, exitcodes.INFRASTRUCTURE}) == 4


def test_run_help_documents_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = capsys.readouterr().out
    for line in ("0    conforms", "1    a rule of the seed failed", "2    usage error", "3    infrastructure error"):
        assert line in out


def test_the_verdicts_name_an_infrastructure_error():
    outcomes = {
        "test_seed.py::test_a": CheckOutcome(
            "error", "InfrastructureError: node gpu-1 advertises aliyun.com/gpu-mem: 0"
        ),
        "test_seed.py::test_b": CheckOutcome("failed", "AssertionError: 1 card(s) visible"),
    }
    assert summary.infrastructure_error(VerdictFile([], outcomes, {})) == "node gpu-1 advertises aliyun.com/gpu-mem: 0"
    assert summary.infrastructure_error(VerdictFile([], {"t::x": CheckOutcome("failed", "x")}, {})) is None


def test_run_on_an_empty_kubeconfig_says_so_once_and_exits_3(tmp_path, capsys):
    """kubectl would read the empty file as http://localhost:8080: every check failed on it."""
    empty = tmp_path / "empty"
    empty.write_text("")
    code = cli.main(["run", "--cluster", "existing", "--kubeconfig", str(empty), "--report-dir", str(tmp_path / "r")])
    captured = capsys.readouterr()
    assert code == exitcodes.INFRASTRUCTURE
    assert captured.err.strip().splitlines() == [
        f"infrastructure error, nothing judged: kubeconfig {empty} is empty: no cluster to reach"
    ]
    assert captured.out == "" and not (tmp_path / "r").exists()


def test_run_on_an_unreachable_server_names_it(tmp_path, capsys):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    assert cli.main(["run", "--cluster", "existing", "--kubeconfig", str(kubeconfig)]) == exitcodes.INFRASTRUCTURE
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "cannot reach the API server https://127.0.0.1:1" in err


def test_run_with_a_missing_kubeconfig_is_a_usage_error(tmp_path, capsys):
    assert cli.main(["run", "--cluster", "existing", "--kubeconfig", str(tmp_path / "nope")]) == exitcodes.USAGE
    assert "--kubeconfig: file not found" in capsys.readouterr().err


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_an_infrastructure_error_stops_the_session_with_one_message_and_status_3(tmp_path, workers):
    (tmp_path / "test_checks.py").write_text(CHECKS)
    (tmp_path / "empty").write_text("")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)]
        + ["--gpushare-cluster", "existing", "--gpushare-cluster-kubeconfig", str(tmp_path / "empty")]
        + ["--gpushare-kubectl-binary", "/bin/true", *workers],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    out = result.stdout + result.stderr
    assert result.returncode == exitcodes.INFRASTRUCTURE, out
    assert "Traceback" not in out and "def " not in out, out
    assert "InfrastructureError: kubeconfig" in out and "is empty: no cluster to reach" in out
    # The session stopped: at most one check per worker met the error, the rest did not run.
    errors = out.count("ERROR at setup of")
    assert 1 <= errors <= max(1, len(workers) and 2), out
