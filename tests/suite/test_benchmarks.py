"""The suite benchmarks' arithmetic: what a check's own time is, the least wall time
any order could reach, the replay on one and two nodes, and the soak's failure list."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import soak  # noqa: E402
import suite_walltime as walltime  # noqa: E402
from suite_child import pytest_extra, suite_argv  # noqa: E402

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
 <testcase classname="test_lifecycle" name="test_restart" time="14.0">
  <properties><property name="gpushare.placement" value="alone waited=2.00"/></properties></testcase>
 <testcase classname="test_isolation" name="test_two_pods" time="9.0">
  <properties><property name="gpushare.placement" value="all waited=4.00"/></properties></testcase>
 <testcase classname="test_seed" name="test_seed" time="8.0">
  <properties><property name="gpushare.placement" value="2 waited=0.00"/></properties></testcase>
 <testcase classname="test_grid" name="test_grid" time="5.0">
  <properties><property name="gpushare.placement" value="1 waited=1.00"/></properties>
  <failure message="card_total: 5120 MiB exceeds the 4 GiB share"/></testcase>
 <testcase classname="test_multinode" name="test_split" time="0.1"><skipped message="one GPU node"/></testcase>
</testsuite></testsuites>
"""


@pytest.fixture
def junit(tmp_path) -> Path:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    return path


def test_a_checks_own_time_leaves_out_its_wait_for_capacity_and_skips_are_not_checks(junit):
    checks = walltime.read_checks(junit)
    assert [(c.name, c.seconds, c.need) for c in checks] == [
        ("test_lifecycle::test_restart", 12.0, "alone"),
        ("test_isolation::test_two_pods", 5.0, "all"),
        ("test_seed::test_seed", 8.0, "2"),
        ("test_grid::test_grid", 4.0, "1"),
    ]


def test_least_wall_time_is_the_whole_node_checks_in_a_row_plus_card_seconds_over_cards(junit):
    checks = walltime.read_checks(junit)
    # 12 (alone) + 5 (all cards) + (2 x 8 + 1 x 4) / 4 cards
    assert walltime.lower_bound(checks, 4) == pytest.approx(22.0)
    assert walltime.replay(checks, 1, 4, 4) >= walltime.lower_bound(checks, 4)


def test_replay_runs_exclusive_checks_alone_and_a_second_node_overlaps_card_checks():
    checks = [walltime.Check(f"c{i}", 10.0, "2") for i in range(4)] + [walltime.Check("r", 10.0, "alone")]
    assert walltime.replay(checks, 1, 4, 4) == pytest.approx(30.0)  # two pairs, then the restart
    assert walltime.replay(checks, 2, 4, 4) == pytest.approx(20.0)
    assert walltime.replay(checks, 2, 4, 1) == pytest.approx(50.0)  # one worker: all in a row


def test_soak_lists_failed_and_errored_checks_and_a_run_without_junit(junit, tmp_path):
    assert soak.failures(junit) == ["test_grid::test_grid"]
    assert soak.failures(tmp_path / "missing.xml") == ["(no JUnit XML: the run did not finish)"]


def test_the_child_run_is_the_installed_checks_in_parallel():
    argv = suite_argv("kind", 3, Path("/r/junit.xml"), keep_cluster=True, extra=["-k", "seed"])
    assert argv[1:] == [
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
        "kind",
        "--junitxml",
        "/r/junit.xml",
        "--gpushare-keep-cluster-up",
        "-k",
        "seed",
    ]
    assert "--gpushare-keep-cluster-up" not in suite_argv("local", 4, Path("j.xml"), keep_cluster=False, extra=[])
    assert pytest_extra(["--", "-x"]) == ["-x"] and pytest_extra(["-x"]) == ["-x"]


@pytest.mark.parametrize("script", ["soak.py", "suite_walltime.py"])
def test_benchmark_help_explains_every_option(script):
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--help"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    for option in ("--workers", "--cluster"):
        assert option in out, f"{script} --help does not mention {option}:\n{out}"


TEST_COMMAND_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4" time="100.0">
 <testcase classname="tests.peers.test_peer_verdicts" name="test_hami_like" time="60.0"/>
 <testcase classname="tests.local.test_main_job" name="test_main_job" time="30.0"/>
 <testcase classname="tests.kind.test_kind_suite" name="test_suite_on_kind" time="50.0"/>
 <testcase classname="tests.stack.test_state" name="test_booking" time="5.0"/>
</testsuite></testsuites>
"""


def test_where_time_goes_adds_up_folders_and_the_streams_of_the_test_command(tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text(TEST_COMMAND_JUNIT)
    argv = [sys.executable, str(BENCHMARKS / "where_time_goes.py"), str(path)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    assert "wall 100 s, serial 145 s, 4 tests" in out, out
    assert re.search(r"tests/peers\s+1\s+60\s+41\.4%", out), out
    for stream, seconds in (("local-cluster", 30), ("peer-cluster", 60), ("kind-cluster", 50), ("no cluster", 5)):
        assert re.search(rf"{stream}\s+{seconds} s", out), out
