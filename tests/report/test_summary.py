"""The verdict at a glance: one line per seed rule, from the reports' user properties
(also under pytest-xdist), and ``run --verdicts all``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

from gpushare_conformance.allocation import check_card_count, check_card_total
from gpushare_conformance.commands import run
from gpushare_conformance.report import (
    CheckOutcome,
    VerdictFile,
    VerdictRecord,
    read_verdicts,
    record_from_verdict,
    write_verdicts,
)
from gpushare_conformance.rules import RULES
from gpushare_conformance.summary import FAIL, INFO, NOT_RUN, PASS, build_summary, conformance_line, render_text

SEED = "conformance/test_seed.py::test_seed_job_gets_4gib_on_each_of_2_cards"
ISOLATION = "conformance/test_isolation.py::test_allocation_up_to_share_succeeds_and_past_share_fails_out_of_memory"
GRID = "conformance/test_grid.py::test_n_gib_over_m_cards_gives_n_over_m_on_each_card[3GiBx2]"
LIMITATION = "conformance/test_limitation.py::test_compute_is_shared_not_isolated"
ANSI = re.compile(r"\x1b\[")
SCREEN_LINES, WIDTH = 24, 100


def _fake_run() -> VerdictFile:
    seed = [
        record_from_verdict(SEED, v)
        for v in (check_card_count(2, 2), check_card_total(4096, 4, 16160), check_card_total(4096, 4, 16160))
    ]
    seed.append(VerdictRecord(SEED, "total_memory_lines", "2", "2", True, detail="'totalMemory:' lines: 2"))
    isolation = [
        record_from_verdict(ISOLATION, check_card_count(2, 2)),
        record_from_verdict(ISOLATION, check_card_total(16160, 2, 16160)),
    ]
    info = [
        VerdictRecord(
            LIMITATION, "compute_isolation", "-", "not isolated: pods share a card's compute", True, kind="info"
        )
    ]
    return VerdictFile(
        seed + isolation + info,
        {
            SEED: CheckOutcome("passed"),
            ISOLATION: CheckOutcome(
                "failed",
                "card_total: 16160 MiB is the card's physical size",
                ("reports/diagnostics/gs-alloc-1-ab12", "allure: reports/allure-results"),
            ),
            GRID: CheckOutcome("skipped", "needs 2 cards on one node; the largest GPU node has 1"),
            LIMITATION: CheckOutcome("passed"),
        },
        {"stack": "reference", "cluster": "local"},
    )


def test_one_line_per_rule_with_status_and_figure():
    lines = {line.rule.id: line for line in build_summary(_fake_run())}
    assert list(lines) == list(RULES), "every rule of the registry, in its order"
    assert lines["multi_gpu_share"].status == PASS
    assert lines["multi_gpu_share"].figure == "2 cards x 4096 MiB, want 4096..4505 MiB and < 16160 MiB"
    assert lines["isolation_log"].status == PASS and "totalMemory" in lines["isolation_log"].figure
    # The isolation check failed on its card total: the rule it guards fails, naming the figure.
    assert lines["isolation_smi"].status == FAIL
    assert lines["isolation_smi"].figure == "2 cards x 16160 MiB, want 2048..2252 MiB and < 16160 MiB"
    assert "reports/diagnostics/gs-alloc-1-ab12" in lines["isolation_smi"].evidence
    # The check stopped at its premise (the card total) before its allocations: the rule
    # is not shown to hold, and the premise's figure is the evidence; never a SKIP.
    assert lines["alloc_past_share_refused"].status == FAIL
    assert lines["alloc_past_share_refused"].figure.startswith("not shown: the check stopped at ")
    assert "16160 MiB" in lines["alloc_past_share_refused"].figure
    assert lines["compute_shared"].status == INFO and "not isolated" in lines["compute_shared"].figure
    assert lines["capacity_returned"].status == NOT_RUN


def test_a_check_that_errors_outside_a_verdict_fails_its_rules():
    run_ = VerdictFile([], {ISOLATION: CheckOutcome("error", "WaitError: pod alloc did not start in 120 s")}, {})
    lines = {line.rule.id: line for line in build_summary(run_)}
    assert lines["alloc_past_share_refused"].status == FAIL
    assert "pod alloc did not start" in lines["alloc_past_share_refused"].figure


def test_summary_fits_one_screen_names_the_evidence_and_has_no_colour_off_a_terminal():
    text = render_text(_fake_run(), width=WIDTH, colour=False, full_list="full list: run --verdicts all")
    lines = text.splitlines()
    assert len(lines) <= SCREEN_LINES and all(len(line) <= WIDTH for line in lines), text
    assert not ANSI.search(text)
    assert lines[0].startswith("seed rules (reference stack on local cluster): ")
    fail = next(i for i, line in enumerate(lines) if line.startswith("FAIL"))
    assert "nvidia-smi shows N/M GiB, not the card" in lines[fail] and "16160 MiB" in lines[fail]
    assert lines[fail + 1].strip().startswith("evidence: reports/diagnostics/gs-alloc-1-ab12, allure: reports/")
    assert "(of test_isolation.py" in lines[fail + 1], "then the check, cut to the line if need be"
    shown = [rule for rule in RULES.values() if rule.words in text]
    assert all(any(rule.words in line for line in lines) for rule in shown), "the rule's words are never cut"
    # Rules no check judged take at most three lines; the rest are counted.
    more = re.search(r"; and (\d+) more$", text, re.M)
    assert more and len(shown) + int(more.group(1)) == len(RULES), text
    coloured = render_text(_fake_run(), width=WIDTH, colour=True)
    assert "\x1b[1;31mFAIL\x1b[0m" in coloured and "\x1b[32mPASS\x1b[0m" in coloured


FAKE_CHECKS = textwrap.dedent('''
    """Checks named like the registry's, recording verdicts as the suite's context does."""
    import json

    import pytest


    def _verdict(record_property, check, expected, observed, passed, detail=""):
        record_property("gpushare.verdict", json.dumps({"check": check, "expected": expected, "observed": observed,
                                                        "passed": passed, "detail": detail, "kind": "verdict"}))
        assert passed, f"{check}: {detail} (expected {expected}, observed {observed})"


    def test_seed_job_gets_4gib_on_each_of_2_cards(record_property):
        _verdict(record_property, "card_count", "2", "2", True)
        _verdict(record_property, "card_total", "4096..4505 MiB and < 16160 MiB", "4096", True)


    def test_allocation_up_to_share_succeeds_and_past_share_fails_out_of_memory(record_property, request):
        request.node.user_properties.append(("gpushare.diagnostics", "REPORT/diagnostics/gs-alloc-1-ab12"))
        _verdict(record_property, "card_total", "2048..2252 MiB and < 16160 MiB", "16160", False,
                 "16160 MiB is the card's physical size or more (16160 MiB): memory is not isolated")


    @pytest.mark.parametrize("component", ["device plugin", "extender"])
    def test_restarting_a_component_loses_no_allocation_and_double_books_nothing(component):
        pytest.skip("needs a disruptive run")


    def test_not_a_check():
        pass
''')


def _run_fake(tmp_path, *extra):
    (tmp_path / "test_fake_checks.py").write_text(FAKE_CHECKS.replace("REPORT", str(tmp_path / "r")))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            str(tmp_path),
            "--rootdir",
            str(tmp_path),
            "--gpushare-report-dir",
            str(tmp_path / "r"),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )


def _summary_block(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "gpushare verdict summary" in line)
    return lines[
        start + 1 : start + 1 + next(i for i, line in enumerate(lines[start + 1 :]) if line.startswith("full")) + 1
    ]


def test_pytest_prints_the_summary_from_the_reports(tmp_path):
    result = _run_fake(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert not ANSI.search(result.stdout), "no colour when stdout is not a terminal"
    block = _summary_block(result.stdout)
    assert len(block) <= SCREEN_LINES, "\n".join(block)
    assert any(
        line.startswith("PASS") and "N/M GiB on each of M cards" in line and "2 cards x 4096 MiB" in line
        for line in block
    ), "\n".join(block)
    fail = next(i for i, line in enumerate(block) if line.startswith("FAIL"))
    assert "16160" in block[fail] and str(tmp_path / "r" / "diagnostics" / "gs-alloc-1-ab12") in block[fail + 1]
    assert any(line.startswith("SKIP") and "restarts lose no allocation" in line for line in block)
    written = read_verdicts(tmp_path / "r" / "verdicts.json")
    assert sorted(written.outcomes) == sorted(
        [
            "test_fake_checks.py::test_seed_job_gets_4gib_on_each_of_2_cards",
            "test_fake_checks.py::test_allocation_up_to_share_succeeds_and_past_share_fails_out_of_memory",
            "test_fake_checks.py::test_restarting_a_component_loses_no_allocation_and_double_books_nothing[device plugin]",
            "test_fake_checks.py::test_restarting_a_component_loses_no_allocation_and_double_books_nothing[extender]",
        ]
    ), "only the checks, not test_not_a_check"
    assert len(written.records) == 3


def test_the_controller_builds_the_summary_under_xdist(tmp_path):
    result = _run_fake(tmp_path, "-n", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    block = _summary_block(result.stdout)
    assert any(line.startswith("FAIL") and "16160" in line for line in block), "\n".join(block)
    written = read_verdicts(tmp_path / "r" / "verdicts.json")
    assert len(written.records) == 3 and len(written.outcomes) == 4, "every worker's verdicts reach the controller"


def test_verdict_summary_all_and_off(tmp_path):
    everything = _run_fake(tmp_path, "--gpushare-verdict-summary", "all")
    assert "gpushare verdicts" in everything.stdout and "card_total" in everything.stdout
    off = _run_fake(tmp_path, "--gpushare-verdict-summary", "off")
    assert "gpushare verdict summary" not in off.stdout


def test_run_prints_all_verdicts_then_the_rules(tmp_path, monkeypatch, capsys):
    report_dir = tmp_path / "reports"

    def fake_pytest(argv):
        assert argv[argv.index("--gpushare-verdict-summary") + 1] == "off", "run prints the summary itself"
        write_verdicts(report_dir / "verdicts.json", _fake_run())
        return 1

    monkeypatch.setattr(run, "_run_to_the_end", fake_pytest)
    status = run.main(["run", "--report-dir", str(report_dir), "--verdicts", "all"])
    out = capsys.readouterr().out
    assert status == 1
    assert not ANSI.search(out), "captured output is no terminal: no colour"
    table_at, summary_at = out.index(SEED), out.index("seed rules (reference stack on local cluster)")
    assert table_at < summary_at, "the table first, the verdict last"
    assert "card_total" in out[table_at:summary_at] and "FAIL" in out[table_at:summary_at]
    assert "--report-name 'gpushare conformance: reference stack on local cluster'" in out


def test_run_without_verdicts_all_prints_only_the_rules(tmp_path, monkeypatch, capsys):
    report_dir = tmp_path / "reports"
    monkeypatch.setattr(
        run, "_run_to_the_end", lambda argv: write_verdicts(report_dir / "verdicts.json", _fake_run()) and 0
    )
    assert run.main(["run", "--report-dir", str(report_dir)]) == 0
    out = capsys.readouterr().out
    assert SEED not in out and "full list: gpushare-conformance run --verdicts all" in out
    assert json.loads((report_dir / "verdicts.json").read_text())["schema"] == 2


def test_known_gaps_fail_and_say_so_and_a_passing_one_is_shown():
    run_ = _fake_run()
    run_.facts["known_gaps"] = "isolation_smi,multi_gpu_share"
    lines = {line.rule.id: line for line in build_summary(run_)}
    assert lines["isolation_smi"].status == FAIL, "a known gap is still a failure"
    assert lines["isolation_smi"].shown_figure.startswith("(known gap) 2 cards x 16160 MiB")
    assert lines["multi_gpu_share"].status == PASS
    assert lines["multi_gpu_share"].shown_figure.startswith("(known gap, yet it passed) ")
    text = render_text(run_, width=WIDTH)
    assert "(known gap)" in text and "(known gap, yet it passed)" in text


def test_the_table_ends_with_whether_the_stack_conforms():
    lines = build_summary(_fake_run())
    assert conformance_line(lines).startswith("conforms to the seed: no (")
    text = render_text(_fake_run(), width=WIDTH).splitlines()
    assert text[-1].startswith("conforms to the seed: no"), text[-1]
    passing = [line for line in lines if line.status == PASS]
    assert conformance_line(passing) == "conforms to the seed: yes (every rule passed)"
    assert "not judged here" in conformance_line(passing + [line for line in lines if line.status == NOT_RUN])


def test_an_infrastructure_error_is_not_a_verdict_on_the_stack():
    reason = "InfrastructureError: node gpu-1 advertises aliyun.com/gpu-mem: 0: its device plugin is not registered"
    run_ = VerdictFile([], {SEED: CheckOutcome("error", reason), ISOLATION: CheckOutcome("error", reason)}, {})
    lines = build_summary(run_)
    assert not [line for line in lines if line.status == FAIL]
    assert conformance_line(lines).startswith("conforms to the seed: not judged (InfrastructureError: node gpu-1")


def test_the_junit_xml_says_which_ai_conformance_requirements_each_check_gives_evidence_for(tmp_path):
    result = _run_fake(tmp_path, "--junitxml", str(tmp_path / "junit.xml"), "-o", "junit_family=xunit1")
    assert result.returncode == 1, result.stdout + result.stderr
    import xml.etree.ElementTree as ElementTree

    found = {}
    for case in ElementTree.parse(tmp_path / "junit.xml").iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        found[case.get("name")] = props.get("ai_conformance")
    assert found["test_seed_job_gets_4gib_on_each_of_2_cards"] == "gpu_sharing secure_accelerator_access"
    assert found["test_not_a_check"] is None
