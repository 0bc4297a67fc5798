"""Verdict records, the user property they travel in, the table, verdicts.json and
environment.properties."""

import json
import re
import subprocess
import sys

import pytest

from gpushare_conformance.allocation import check_card_total
from gpushare_conformance.report import (
    CheckOutcome,
    ReportError,
    VerdictFile,
    VerdictRecord,
    property_value,
    read_verdicts,
    record_from_property,
    record_from_verdict,
    records_from_properties,
    render_table,
    report_name,
    write_environment,
    write_verdicts,
)

SEED = "conformance/test_seed.py::test_seed_job_gets_4gib_on_each_of_2_cards"
ANSI = re.compile(r"\x1b\[")


def test_record_from_an_allocation_verdict_words_the_window():
    record = record_from_verdict(SEED, check_card_total(4309, 4, 16160))
    assert record.check == "card_total" and record.passed and record.observed == "4309"
    assert record.expected == "4096..4505 MiB and < 16160 MiB"
    assert "4309 MiB for a 4 GiB share" in record.detail
    failing = record_from_verdict(SEED, check_card_total(16160, 4, 16160))
    assert not failing.passed and failing.outcome == "FAIL" and "not isolated" in failing.detail


def test_record_from_an_object_without_the_fields_is_an_error():
    with pytest.raises(ReportError, match="lacks field"):
        record_from_verdict("t", object())


def test_a_record_survives_its_user_property():
    record = record_from_verdict(SEED, check_card_total(4309, 4, 16160))
    value = property_value(record)
    assert set(json.loads(value)) == {"check", "expected", "observed", "passed", "detail", "kind"}
    assert record_from_property(SEED, value) == record
    props = [("gpushare.verdict", value), ("other", "x"), ("gpushare.verdict", value)]
    assert records_from_properties(SEED, props) == [record, record]


def test_a_property_that_is_not_a_verdict_is_a_clear_error():
    with pytest.raises(ReportError, match="gpushare.verdict property .* is not a verdict"):
        record_from_property(SEED, "{]")
    with pytest.raises(ReportError, match="is not a verdict"):
        record_from_property(SEED, json.dumps({"check": "x", "colour": "red"}))


def test_table_shows_check_expected_observed_result_and_never_cuts_the_check():
    long_check = "alloc_past_share_oom[card 0 of a node with a remarkably long name, kept whole]"
    records = [
        VerdictRecord(SEED, "card_count", "2", "2", True),
        VerdictRecord(SEED, "card_total", "4096..4505 MiB and < 16160 MiB", "16160", False),
        VerdictRecord(SEED, long_check, "z" * 300, "[b]x[/b]", True),
        VerdictRecord(
            "conformance/test_limitation.py::test_compute", "compute_isolation", "-", "not isolated", True, kind="info"
        ),
    ]
    table = render_table(records, width=100, colour=False)
    lines = table.splitlines()
    assert not ANSI.search(table), "no colour unless asked"
    assert re.search(r"\bcheck\b.*\bexpected\b.*\bobserved\b.*\bresult\b", table)
    assert any("card_total" in line and "16160" in line and "FAIL" in line for line in lines)
    assert any("compute_isolation" in line and "info" in line for line in lines)
    assert SEED in lines and long_check in table, "the check's id and the verdict's name are never cut"
    assert "[b]x[/b]" in table, "cells are text, never rich markup"
    assert table.count("z") == 300, "long cells wrap, not cut"
    assert lines[-1] == "4 verdict(s), 1 failed"
    assert "\x1b[" in render_table(records, width=100, colour=True)


def test_empty_table_says_so():
    assert "(no verdicts recorded)" in render_table([])


def test_verdicts_round_trip(tmp_path):
    result = VerdictFile(
        [VerdictRecord(SEED, "card_count", "2", "2", True, detail="2 card(s) visible")],
        {SEED: CheckOutcome("failed", "card_total: ...", ("reports/diagnostics/gs-x",))},
        {"stack": "reference", "cluster": "local"},
    )
    path = write_verdicts(tmp_path / "r" / "verdicts.json", result)
    assert read_verdicts(path) == result


def test_reading_a_bad_verdicts_file_is_a_clear_error(tmp_path):
    with pytest.raises(ReportError, match="no verdicts file"):
        read_verdicts(tmp_path / "verdicts.json")
    (tmp_path / "verdicts.json").write_text("{]")
    with pytest.raises(ReportError, match="not JSON"):
        read_verdicts(tmp_path / "verdicts.json")
    (tmp_path / "verdicts.json").write_text(json.dumps({"schema": 2, "verdicts": [{"check": "x"}]}))
    with pytest.raises(ReportError, match="verdict #0 has the wrong fields"):
        read_verdicts(tmp_path / "verdicts.json")
    (tmp_path / "verdicts.json").write_text(json.dumps({"schema": 1, "verdicts": []}))
    with pytest.raises(ReportError, match="expected .*'schema': 2"):
        read_verdicts(tmp_path / "verdicts.json")


def test_environment_properties(tmp_path):
    path = write_environment(
        tmp_path,
        {"cluster": "local", "driver": "470.82.01", "mocked_nvml": "true", "node.gpu-1.cards": "0:16160MiB,1:16160MiB"},
    )
    text = path.read_text()
    assert path.name == "environment.properties"
    assert "cluster = local\n" in text and "mocked_nvml = true\n" in text
    assert "node.gpu-1.cards = 0\\:16160MiB,1\\:16160MiB" in text


def test_report_is_named_after_stack_and_cluster():
    assert report_name({"stack": "ack", "cluster": "existing"}) == "gpushare conformance: ack stack on existing cluster"


def test_plugin_writes_verdicts_environment_and_report_name_for_allure(tmp_path):
    (tmp_path / "test_x.py").write_text("def test_plain():\n    pass\n")
    report, allure_dir = tmp_path / "report", tmp_path / "allure"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            str(tmp_path / "test_x.py"),
            "--rootdir",
            str(tmp_path),
            "--gpushare-report-dir",
            str(report),
            "--alluredir",
            str(allure_dir),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    written = read_verdicts(report / "verdicts.json")
    # A test that uses no cluster is not one of the suite's checks: no verdict, no outcome, no summary.
    assert written.records == [] and written.outcomes == {}
    assert "gpushare verdict summary" not in result.stdout
    env = (allure_dir / "environment.properties").read_text()
    assert "cluster = local" in env and "mocked_nvml = true" in env and "run_id = " in env
    executor = json.loads((allure_dir / "executor.json").read_text())
    assert executor["reportName"] == "gpushare conformance: reference stack on local cluster"
    assert list(allure_dir.glob("*-result.json")), "allure results written"
