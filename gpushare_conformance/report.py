"""The suite's report data: verdicts the checks record, verdicts.json, the full verdict
table, and the environment facts written for allure.

A check records each comparison it makes (check, expected, observed, pass/fail) as a
pytest user property named ``gpushare.verdict`` (JSON), so it travels with the test's
report: the controller of a run (also under pytest-xdist) reads the reports, not the
workers' memory, and writes ``<report-dir>/verdicts.json``; ``summary.py`` turns that
into the verdict at a glance, ``render_table`` into the full list.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

VERDICTS_FILE = "verdicts.json"
ENVIRONMENT_FILE = "environment.properties"
VERDICTS_SCHEMA = 2
VERDICT_PROPERTY = "gpushare.verdict"
DIAGNOSTICS_PROPERTY = "gpushare.diagnostics"
OUTCOMES = ("passed", "failed", "error", "skipped")


class ReportError(ValueError):
    """A verdicts file or verdict property that is missing, unreadable or of the wrong shape."""


# Record kinds that state something other than a comparison, and how a row shows them.
NOT_VERDICT_KINDS = {"info": "info", "not_judged": "not judged", "not_applicable": "n/a"}


@dataclass(frozen=True)
class VerdictRecord:
    """One comparison a check made, as the report shows it."""

    test: str  # the check's pytest node id
    check: str
    expected: str
    observed: str
    passed: bool
    # "info" rows state facts (e.g. compute is not isolated) rather than judge them;
    # "not_judged": the check could not exercise its rule (the reason is the detail);
    # "not_applicable": the rule does not apply to the stack (no extender to attack);
    # "open": an attack beyond what the stack's kind of layer can hold got through
    # (docs/threat-model.md): shown as OPEN, never as a pass, and not a failure.
    kind: str = "verdict"
    detail: str = ""

    @property
    def outcome(self) -> str:
        if self.kind == "open":
            return "pass" if self.passed else "OPEN"
        if self.kind in NOT_VERDICT_KINDS:
            return NOT_VERDICT_KINDS[self.kind]
        return "pass" if self.passed else "FAIL"

    @property
    def base_check(self) -> str:
        """The check's name without its ``[...]`` qualifier (``alloc_past_share_oom[card 0]``)."""
        return self.check.split("[", 1)[0]


@dataclass(frozen=True)
class CheckOutcome:
    """How one check (a pytest test) ended, and where its evidence is."""

    outcome: str  # one of OUTCOMES
    reason: str = ""  # skip reason or the first line of the failure
    evidence: tuple[str, ...] = ()  # diagnostics folders, allure results


@dataclass
class VerdictFile:
    records: list[VerdictRecord] = field(default_factory=list)
    outcomes: dict[str, CheckOutcome] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)


def words(value: Any) -> str:
    """A verdict's figure in words: card-total windows as ``4096..4505 MiB and < 16160 MiB``."""
    if isinstance(value, Mapping) and {"min_mib", "max_mib"} <= set(value):
        text = f"{value['min_mib']}..{value['max_mib']} MiB"
        if value.get("below_physical_mib") is not None:
            text += f" and < {value['below_physical_mib']} MiB"
        return text
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def record_from_verdict(test: str, verdict: Any, kind: str = "verdict") -> VerdictRecord:
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
        expected=words(verdict.expected),
        observed=words(verdict.observed),
        passed=bool(verdict.passed),
        kind=kind,
        detail=str(getattr(verdict, "detail", "") or ""),
    )


def property_value(record: VerdictRecord) -> str:
    """The ``gpushare.verdict`` user property's value for ``record`` (the test id stays out:
    the report it travels with names the test)."""
    data = asdict(record)
    del data["test"]
    return json.dumps(data, sort_keys=True)


def record_from_property(test: str, value: str) -> VerdictRecord:
    """Read one ``gpushare.verdict`` property back (see ``property_value``)."""
    try:
        data = json.loads(value)
        return VerdictRecord(test=test, **data)
    except (ValueError, TypeError) as exc:
        raise ReportError(f"{test}: {VERDICT_PROPERTY} property {value!r} is not a verdict: {exc}") from exc


def records_from_properties(test: str, user_properties: Iterable[tuple[str, Any]]) -> list[VerdictRecord]:
    return [record_from_property(test, str(v)) for k, v in user_properties if k == VERDICT_PROPERTY]


def write_verdicts(path: Path, result: VerdictFile) -> Path:
    """Write the verdicts, each check's outcome and the run's facts as JSON; returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "schema": VERDICTS_SCHEMA,
        "facts": dict(result.facts),
        "outcomes": {k: {**asdict(v), "evidence": list(v.evidence)} for k, v in result.outcomes.items()},
        "verdicts": [asdict(r) for r in result.records],
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
    return path


def read_verdicts(path: Path) -> VerdictFile:
    """Read a file written by ``write_verdicts``."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ReportError(
            f"no verdicts file at {path} (did the suite run with --gpushare-report-dir {path.parent}?)"
        ) from None
    except ValueError as exc:
        raise ReportError(f"{path} is not JSON: {exc}") from exc
    if (
        not isinstance(data, dict)
        or data.get("schema") != VERDICTS_SCHEMA
        or not isinstance(data.get("verdicts"), list)
    ):
        raise ReportError(f"{path}: expected {{'schema': {VERDICTS_SCHEMA}, 'verdicts': [...], ...}}")
    result = VerdictFile(facts={str(k): str(v) for k, v in (data.get("facts") or {}).items()})
    for i, row in enumerate(data["verdicts"]):
        try:
            result.records.append(VerdictRecord(**row))
        except TypeError as exc:
            raise ReportError(f"{path}: verdict #{i} has the wrong fields: {exc}") from exc
    for nodeid, row in (data.get("outcomes") or {}).items():
        try:
            result.outcomes[nodeid] = CheckOutcome(
                row["outcome"], row.get("reason", ""), tuple(row.get("evidence", ()))
            )
        except (KeyError, TypeError) as exc:
            raise ReportError(f"{path}: outcome of {nodeid} has the wrong shape: {exc}") from exc
    return result


def render_table(records: Sequence[VerdictRecord], *, width: int | None = None, colour: bool = False) -> str:
    """The full verdict list (rich): per check, its id, then a table of its verdicts
    (check, expected, observed, result).

    Neither the check's id nor a verdict's name is ever cut (the name column is as wide
    as the longest name; an id too long for the line wraps); expected and observed wrap.
    Colour only when ``colour`` (the caller knows whether it writes to a terminal).
    """
    from io import StringIO

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    width = width or 100
    name_w = max([len("check"), *(len(r.check) for r in records)])
    rest = max(width - name_w - len("not judged") - 13, 24)
    out = StringIO()
    console = Console(
        file=out,
        width=max(width, name_w + rest + len("not judged") + 13),
        force_terminal=colour,
        no_color=not colour,
        color_system="standard" if colour else None,
        highlight=False,
    )
    styles = {"pass": "green", "FAIL": "bold red", "info": "cyan", "not judged": "yellow", "n/a": "dim"}
    tests: dict[str, list[VerdictRecord]] = {}
    for r in records:
        tests.setdefault(r.test, []).append(r)
    for test, rows in tests.items():
        console.print(Text(test, style="bold"))
        table = Table(box=box.SQUARE if colour else box.ASCII2, header_style="bold" if colour else "")
        table.add_column("check", no_wrap=True, width=name_w)
        table.add_column("expected", overflow="fold", width=rest // 2)
        table.add_column("observed", overflow="fold", width=rest - rest // 2)
        table.add_column("result", no_wrap=True, width=len("not judged"))
        # Text cells: a check's words (``[card 0]``, a /regex/) are never read as markup.
        for r in rows:
            table.add_row(Text(r.check), Text(r.expected), Text(r.observed), Text(r.outcome, style=styles[r.outcome]))
        console.print(table)
    if not records:
        console.print("(no verdicts recorded)")
    failed = sum(1 for r in records if r.kind not in NOT_VERDICT_KINDS and not r.passed)
    console.print(f"{len(records)} verdict(s), {failed} failed", highlight=False)
    return out.getvalue().rstrip("\n")


def _escape_property(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")


def write_environment(directory: Path, facts: Mapping[str, Any]) -> Path:
    """Write allure's ``environment.properties`` (key = value, one a line) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ENVIRONMENT_FILE
    lines = [f"{key.replace(' ', '_')} = {_escape_property(value)}" for key, value in sorted(facts.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_executor(directory: Path, report_name: str) -> Path:
    """Write allure's ``executor.json``, which names the report (Allure 2 reads it)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "executor.json"
    path.write_text(
        json.dumps(
            {"name": "gpushare-conformance", "type": "local", "reportName": report_name, "buildName": report_name},
            indent=2,
        )
        + "\n"
    )
    return path


def report_name(facts: Mapping[str, str]) -> str:
    """The report's name: the stack and the cluster it ran on."""
    stack, cluster = facts.get("stack", "?"), facts.get("cluster", "?")
    return f"gpushare conformance: {stack} stack on {cluster} cluster"
