"""Off a terminal (a log, a pipe) the rule lines are whole; on one they are cut to fit."""

from __future__ import annotations

from pathlib import Path

from gpushare_conformance.commands import run
from gpushare_conformance.report import CheckOutcome, VerdictFile
from gpushare_conformance.summary import render_lines, render_text

SEED = "conformance/test_seed.py::test_seed_job_gets_4gib_on_each_of_2_cards"
LONG = "AssertionError: " + " ".join(f"card{i} shows 16160 MiB, the physical size" for i in range(8))


def _result() -> VerdictFile:
    return VerdictFile([], {SEED: CheckOutcome("failed", LONG, ("reports/diagnostics/" + "x" * 150,))}, {})


def test_no_width_means_whole_lines():
    text = render_text(_result(), width=None)
    assert "…" not in text and LONG in text and "x" * 150 in text
    assert all("…" not in line for line, _ in render_lines(_result(), None))


def test_a_terminal_width_still_cuts_to_fit():
    lines = render_text(_result(), width=100).splitlines()
    assert any(line.endswith("…") for line in lines) and max(len(line) for line in lines) <= 100


def test_run_prints_whole_lines_when_stdout_is_not_a_terminal(monkeypatch):
    monkeypatch.setattr("sys.stdout.isatty", lambda: False, raising=False)
    text = run.render_verdicts(_result(), "rules", Path("reports"), colour=False)
    assert "…" not in text and LONG in text
