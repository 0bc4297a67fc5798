"""The suite's report: verdicts the checks record, the table printed at the end, and the
environment facts written for allure.

Checks record each comparison they make (check, expected, observed, pass/fail); the
pytest plugin collects them into ``<report-dir>/verdicts.json`` and the ``run`` command
prints them as a table, so a reader sees what was measured, not only which test failed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

VERDICTS_FILE = "verdicts.json"
ENVIRONMENT_FILE = "environment.properties"
VERDICTS_SCHEMA = 1


class ReportError(ValueError):
    """A verdicts file that is missing, unreadable or of the wrong shape."""


@dataclass(frozen=True)
class VerdictRecord:
    """One comparison a check made, as the report shows it."""

    test: str
    check: str
    expected: str
    observed: str
    passed: bool
    # "info" rows state facts (e.g. compute is not isolated) rather than judge them.
    kind: str = "verdict"

    @property
    def outcome(self) -> str:
        if self.kind == "info":
            return "info"
        return "pass" if self.passed else "FAIL"


def record_from_verdict(test: str, verdict: Any) -> VerdictRecord:
    """Turn an ``allocation.Verdict`` (or any object with the same fields) into a record.

    The fields read are ``check``, ``expected``, ``observed`` and ``passed``; a missing
    one is an error, because a row without its expectation would mislead the reader.
    """
    missing = [f for f in ("check", "expected", "observed", "passed") if not hasattr(verdict, f)]
    if missing:
        raise ReportError(f"verdict {verdict!r} lacks field(s) {', '.join(missing)}")
    return VerdictRecord(
        test=test,
        check=str(verdict.check),
        expected=str(verdict.expected),
        observed=str(verdict.observed),
        passed=bool(verdict.passed),
    )


def write_verdicts(path: Path, records: Iterable[VerdictRecord], outcomes: Mapping[str, str] | None = None) -> Path:
    """Write the records (and each test's outcome) as JSON; returns the file written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "schema": VERDICTS_SCHEMA,
        "verdicts": [asdict(r) for r in records],
        "outcomes": dict(outcomes or {}),
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
    return path


def read_verdicts(path: Path) -> tuple[list[VerdictRecord], dict[str, str]]:
    """Read a file written by ``write_verdicts``."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ReportError(f"no verdicts file at {path} (did the suite run with --report-dir {path.parent}?)") from None
    except ValueError as exc:
        raise ReportError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema") != VERDICTS_SCHEMA or not isinstance(data.get("verdicts"), list):
        raise ReportError(f"{path}: expected {{'schema': {VERDICTS_SCHEMA}, 'verdicts': [...]}}")
    records = []
    for i, row in enumerate(data["verdicts"]):
        try:
            records.append(VerdictRecord(**row))
        except TypeError as exc:
            raise ReportError(f"{path}: verdict #{i} has the wrong fields: {exc}") from exc
    return records, dict(data.get("outcomes") or {})


def _short(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render_table(records: Sequence[VerdictRecord], width: int = 48) -> str:
    """A plain-text table: check, expected, observed, pass/FAIL/info (one row per record)."""
    header = ("check", "expected", "observed", "result")
    rows = [(f"{_short(r.test, 40)}: {r.check}", r.expected, r.observed, r.outcome) for r in records]
    rows = [tuple(_short(c, width) for c in row) for row in rows]
    widths = [max(len(header[i]), *(len(row[i]) for row in rows)) if rows else len(header[i]) for i in range(4)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def fmt(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |"

    out = [line, fmt(header), line.replace("-", "=")]
    out += [fmt(row) for row in rows] or [fmt(("(no verdicts recorded)", "", "", ""))]
    out.append(line)
    failed = sum(1 for r in records if r.kind != "info" and not r.passed)
    out.append(f"{len(records)} verdict(s), {failed} failed")
    return "\n".join(out)


def _escape_property(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")


def write_environment(directory: Path, facts: Mapping[str, Any]) -> Path:
    """Write allure's ``environment.properties`` (key = value, one a line) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ENVIRONMENT_FILE
    lines = [f"{key.replace(' ', '_')} = {_escape_property(value)}" for key, value in sorted(facts.items())]
    path.write_text("\n".join(lines) + "\n")
    return path
