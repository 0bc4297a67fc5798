"""Verdict records, the table, verdicts.json and environment.properties."""

import json

import pytest

from gpushare_conformance.allocation import check_card_total
from gpushare_conformance.report import (
    ReportError, VerdictRecord, read_verdicts, record_from_verdict, render_table, write_environment, write_verdicts,
)


def test_record_from_an_allocation_verdict():
    record = record_from_verdict("test_seed", check_card_total(4309, 4, 16160))
    assert record.check == "card_total" and record.passed and record.observed == "4309"
    failing = record_from_verdict("test_seed", check_card_total(16160, 4, 16160))
    assert not failing.passed and failing.outcome == "FAIL"


def test_record_from_an_object_without_the_fields_is_an_error():
    with pytest.raises(ReportError, match="lacks field"):
        record_from_verdict("t", object())


def test_table_shows_check_expected_observed_result():
    records = [
        VerdictRecord("test_seed_job", "card_count", "2", "2", True),
        VerdictRecord("test_seed_job", "card_total", "4096..4505 MiB", "16160", False),
        VerdictRecord("test_compute", "compute_isolation", "-", "not isolated", True, kind="info"),
    ]
    table = render_table(records)
    lines = table.splitlines()
    assert "| check" in lines[1] and "expected" in lines[1] and "observed" in lines[1] and "result" in lines[1]
    assert any("card_total" in line and "16160" in line and "FAIL" in line for line in lines)
    assert any("compute_isolation" in line and "info" in line for line in lines)
    assert lines[-1] == "3 verdict(s), 1 failed"
    widths = {len(line) for line in lines[:-1]}
    assert len(widths) == 1, "rows must align"


def test_empty_table_says_so():
    assert "(no verdicts recorded)" in render_table([])


def test_long_cells_are_cut():
    table = render_table([VerdictRecord("t", "c", "x" * 200, "y", True)], width=30)
    assert "x" * 29 + "…" in table and "x" * 31 not in table


def test_verdicts_round_trip(tmp_path):
    records = [VerdictRecord("t", "card_count", "2", "2", True)]
    path = write_verdicts(tmp_path / "r" / "verdicts.json", records, {"conformance/test_seed.py::t": "passed"})
    again, outcomes = read_verdicts(path)
    assert again == records and outcomes == {"conformance/test_seed.py::t": "passed"}


def test_reading_a_bad_verdicts_file_is_a_clear_error(tmp_path):
    with pytest.raises(ReportError, match="no verdicts file"):
        read_verdicts(tmp_path / "verdicts.json")
    (tmp_path / "verdicts.json").write_text("{]")
    with pytest.raises(ReportError, match="not JSON"):
        read_verdicts(tmp_path / "verdicts.json")
    (tmp_path / "verdicts.json").write_text(json.dumps({"schema": 1, "verdicts": [{"check": "x"}]}))
    with pytest.raises(ReportError, match="verdict #0 has the wrong fields"):
        read_verdicts(tmp_path / "verdicts.json")


def test_environment_properties(tmp_path):
    path = write_environment(tmp_path, {"cluster": "local", "driver": "470.82.01", "mocked_nvml": "true",
                                        "node.gpu-1.cards": "0:16160MiB,1:16160MiB"})
    text = path.read_text()
    assert path.name == "environment.properties"
    assert "cluster = local\n" in text and "mocked_nvml = true\n" in text
    assert "node.gpu-1.cards = 0\\:16160MiB,1\\:16160MiB" in text


def test_plugin_writes_verdicts_and_environment_for_allure(tmp_path):
    import subprocess
    import sys

    (tmp_path / "test_x.py").write_text("def test_plain():\n    pass\n")
    report, allure_dir = tmp_path / "report", tmp_path / "allure"
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(tmp_path / "test_x.py"),
                             "--rootdir", str(tmp_path), "--report-dir", str(report), "--alluredir", str(allure_dir)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    records, outcomes = read_verdicts(report / "verdicts.json")
    # A test that uses no cluster is not one of the suite's checks: no verdict, no outcome.
    assert records == [] and outcomes == {}
    env = (allure_dir / "environment.properties").read_text()
    assert "cluster = local" in env and "mocked_nvml = true" in env and "run_id = " in env
    assert list(allure_dir.glob("*-result.json")), "allure results written"
