"""`nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`.

With a header the columns name themselves, in any order and any number (queries of
150-200 fields are common in monitoring scripts). A header row is one whose every
cell is a field name (letters, digits, `_` and `.`, any case: `pci.baseClass`,
`encoder.stats.sessionCount`), optionally followed by a unit in brackets
(`memory.total [MiB]`), and at least one of which is a field nvidia-smi knows
(`smi_fields.QUERY_GPU_FIELDS`, compared case-insensitively). Fields this project
does not read go to `other`, keyed as the header spells them; nothing assumes a
fixed field list.

Without a header the caller must say which fields were queried; the only exception
is `CANONICAL_QUERY`, the query the suite itself issues, accepted when every row has
its shape (index, name, a `GPU-` UUID, three memory figures with total >= used and
total >= free). Anything else headerless is an error rather than a guess.

Cells: values may contain spaces and slashes (`timestamp` is
`2026/12/03 09:41:12.345`). nvidia-smi's placeholders (`[N/A]`, `[Not Supported]`,
`[Unknown Error]`, `[Insufficient Permissions]`,
`[Requested functionality has been deprecated]`, any other bracketed text, bare
`N/A`, an empty cell) read as None: unknown, not zero. `index` may be anywhere or
absent; then the row order gives the index. A field queried twice (or under two
spellings, `name` and `gpu_name`) must have the same value in both columns. A card
listed twice (same index, UUID or bus id: several samples of `--loop`) is an error,
not more cards.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence

from gpushare_conformance.evidence.errors import EvidenceParseError
from gpushare_conformance.evidence.smi_fields import KNOWN_FIELDS_LOWER
from gpushare_conformance.evidence.smi_report import GpuInfo, NvidiaSmiReport
from gpushare_conformance.evidence.units import DIGITS

CANONICAL_QUERY: tuple[str, ...] = ("index", "name", "uuid", "memory.total", "memory.used", "memory.free")

PLACEHOLDERS = frozenset(
    {
        "[N/A]",
        "N/A",
        "[Not Supported]",
        "[Insufficient Permissions]",
        "[Unknown Error]",
        "[GPU is lost]",
        "[Requested functionality has been deprecated]",
        "",
    }
)

_HEADER_FIELD = re.compile(r"^(?P<field>[A-Za-z][A-Za-z0-9_.]*)(?:\s*\[(?P<unit>[^\]]*)\])?$")
_BRACKETED = re.compile(r"^\[[^\]]*\]$")
_MIB = re.compile(rf"^(?P<n>{DIGITS})\s*(?:MiB)?$")
_INT = re.compile(rf"^{DIGITS}$")
_MEMORY_FIELDS = {
    "memory.total": "memory_total_mib",
    "memory.used": "memory_used_mib",
    "memory.free": "memory_free_mib",
}
# the fields this project reads, by lower-case spelling (aliases included)
_CORE = {
    "index": "index",
    "name": "name",
    "gpu_name": "name",
    "uuid": "uuid",
    "gpu_uuid": "uuid",
    "pci.bus_id": "pci.bus_id",
    "gpu_bus_id": "pci.bus_id",
    "driver_version": "driver_version",
    "mig.mode.current": "mig.mode.current",
    "memory.total": "memory.total",
    "fb_memory_usage.total": "memory.total",
    "memory.used": "memory.used",
    "memory.free": "memory.free",
}
_SHOWN_COLUMNS = 8  # how many column names an error message lists before eliding


def _cells(line: str) -> list[str]:
    try:
        cells = next(csv.reader([line], skipinitialspace=True))
    except csv.Error:
        # the csv module refuses a value over its field limit (131072 characters);
        # nvidia-smi never quotes, so a plain split reads such a row the same way
        cells = line.split(",")
    return [cell.strip() for cell in cells]


def _rows(text: str) -> list[tuple[int, list[str]]]:
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.lstrip("\ufeff")
        if line.strip():
            out.append((number, _cells(line.strip())))
    return out


def _core(field: str) -> str | None:
    return _CORE.get(field.lower())


def _header_fields(cells: list[str]) -> list[str] | None:
    """Field names (as spelled, units dropped) if this row is a header, else None."""
    fields = []
    for cell in cells:
        match = _HEADER_FIELD.match(cell)
        if not match:
            return None
        fields.append(match.group("field"))
    if not any(field.lower() in KNOWN_FIELDS_LOWER for field in fields):
        return None
    return fields


def _names_a_field(cell: str) -> bool:
    match = _HEADER_FIELD.match(cell)
    return (
        bool(match)
        and match.group("field").lower() in KNOWN_FIELDS_LOWER
        and ("." in cell or "_" in cell or "[" in cell)
    )


def looks_like_csv(text: str, fields_given: bool = False) -> bool:
    """A header row naming a known field, rows to read with a given field list, or
    rows of comma-separated values.

    Without a header or a field list, rows must have several values and start with
    an integer (the index): prose that happens to contain commas is not taken for a
    headerless query.
    """
    rows = _rows(text)
    if not rows:
        return False
    if _header_fields(rows[0][1]) is not None:
        return True  # a query of one field has a header of one cell
    if fields_given:
        return True  # parse_csv checks every row against the given fields
    if not all(len(cells) > 1 for _, cells in rows[:3]):
        return False
    if any(_names_a_field(cell) for cell in rows[0][1]):
        return True  # a header with a bad cell: parse_csv says which
    return all(_INT.match(cells[0]) for _, cells in rows)


def is_placeholder(raw: str) -> bool:
    return raw in PLACEHOLDERS or bool(_BRACKETED.match(raw))


def _value(raw: str) -> str | None:
    return None if is_placeholder(raw) else raw


def _mib(raw: str, field: str, number: int, line: str) -> int | None:
    value = _value(raw)
    if value is None:
        return None
    match = _MIB.match(value)
    if not match:
        raise EvidenceParseError(
            f"nvidia-smi CSV: {field} must be '<n> MiB' or a placeholder like [N/A], got {raw!r}", number, line
        )
    return int(match.group("n"))


def _canonical_fits(rows: list[tuple[int, list[str]]]) -> bool:
    for _, cells in rows:
        if len(cells) != len(CANONICAL_QUERY) or not _INT.match(cells[0]) or not cells[2].startswith("GPU-"):
            return False
        memory = [_MIB.match(cell) for cell in cells[3:6]]
        if not all(memory):
            return False
        total, used, free = (int(m.group("n")) for m in memory)
        if total < used or total < free:
            return False
    return True


def _listing(columns: list[str]) -> str:
    if len(columns) <= _SHOWN_COLUMNS:
        return ", ".join(columns)
    return (
        ", ".join(columns[: _SHOWN_COLUMNS - 2]) + f", ... ({len(columns) - _SHOWN_COLUMNS + 1} more), " + columns[-1]
    )


def _given_fields(fields: Sequence[str]) -> list[str]:
    out = []
    for field in fields:
        match = _HEADER_FIELD.match(field.strip())
        if not match:
            raise EvidenceParseError(
                f"nvidia-smi CSV: {field.strip()!r} in the given field list is not a --query-gpu field name"
            )
        out.append(match.group("field"))
    return out


def parse_csv(text: str, fields: Sequence[str] | None = None) -> NvidiaSmiReport:
    """Parse the CSV form; `fields` is the `--query-gpu` list for headerless output."""
    lines = text.splitlines()
    rows = _rows(text)
    if not rows:
        raise EvidenceParseError("nvidia-smi CSV: input is empty")
    first_number, first_cells = rows[0]
    header = _header_fields(first_cells)
    given = _given_fields(fields) if fields is not None else None
    if header is not None:
        if given is not None and [_core(f) or f.lower() for f in given] != [_core(f) or f.lower() for f in header]:
            raise EvidenceParseError(
                f"nvidia-smi CSV: header fields [{_listing(header)}] differ from the given fields [{_listing(given)}]",
                first_number,
                lines[first_number - 1],
            )
        columns, data = header, rows[1:]
    elif given is None and any(_names_a_field(cell) for cell in first_cells):
        bad = next((n, cell) for n, cell in enumerate(first_cells, 1) if not _HEADER_FIELD.match(cell))
        raise EvidenceParseError(
            f"nvidia-smi CSV: the first row looks like a header but column {bad[0]} ({bad[1]!r}) is not a field name "
            "like 'memory.total' or 'memory.total [MiB]'",
            first_number,
            lines[first_number - 1],
        )
    elif given is not None:
        columns, data = given, rows
    elif _canonical_fits(rows):
        columns, data = list(CANONICAL_QUERY), rows
    else:
        raise EvidenceParseError(
            "nvidia-smi CSV without a header: pass the --query-gpu field list (fields=, CLI --fields); "
            f"only the suite's own query {','.join(CANONICAL_QUERY)} is recognised by shape",
            first_number,
            lines[first_number - 1],
        )
    if not data:
        raise EvidenceParseError("nvidia-smi CSV: a header but no GPU rows", first_number, lines[first_number - 1])
    cores = [_core(column) for column in columns]
    if not any(core in ("index", "name", "uuid", *_MEMORY_FIELDS) for core in cores):
        raise EvidenceParseError(
            f"nvidia-smi CSV: the fields [{_listing(columns)}] say nothing about a card; query index, name, uuid or memory.*"
        )
    report = NvidiaSmiReport(format="csv", driver_version=None, cuda_version=None, gpus=[])
    seen: dict[str, set[int | str]] = {"index": set(), "UUID": set(), "bus id": set()}  # a card listed twice
    for position, (number, cells) in enumerate(data):
        line = lines[number - 1]
        if len(cells) != len(columns):
            raise EvidenceParseError(
                f"nvidia-smi CSV: expected {len(columns)} values ({_listing(columns)}), got {len(cells)}", number, line
            )
        if _header_fields(cells) is not None and not any(_INT.match(cell) for cell in cells):
            raise EvidenceParseError("nvidia-smi CSV: a second header row", number, line)
        record: dict[str, str] = {}
        record_column: dict[str, str] = {}
        other: dict[str, str | None] = {}
        for column, core, cell in zip(columns, cores, cells, strict=True):
            if core is None:
                other[column] = _value(cell)
                continue
            if core in record and record[core] != cell:
                raise EvidenceParseError(
                    f"nvidia-smi CSV: columns {record_column[core]!r} and {column!r} name the same field "
                    f"but hold {record[core]!r} and {cell!r}",
                    number,
                    line,
                )
            record[core], record_column[core] = cell, column
        index_raw = record.get("index")
        if index_raw is not None and not _INT.match(index_raw):
            raise EvidenceParseError(f"nvidia-smi CSV: index must be an integer, got {index_raw!r}", number, line)
        gpu = GpuInfo(
            index=int(index_raw) if index_raw is not None else position,
            name=_value(record.get("name", "")),
            memory_used_mib=None,
            memory_total_mib=None,
            uuid=_value(record.get("uuid", "")),
            bus_id=_value(record.get("pci.bus_id", "")),
            mig_mode=_value(record.get("mig.mode.current", "")),
        )
        for column, attribute in _MEMORY_FIELDS.items():
            if column in record:
                setattr(gpu, attribute, _mib(record[column], record_column[column], number, line))
        gpu.other = other
        if "driver_version" in record:
            driver = _value(record["driver_version"])
            if report.driver_version not in (None, driver):
                raise EvidenceParseError(
                    f"nvidia-smi CSV: driver_version differs between rows ({report.driver_version} vs {driver})",
                    number,
                    line,
                )
            report.driver_version = driver
        for what, mine in (("index", gpu.index), ("UUID", gpu.uuid), ("bus id", gpu.bus_id)):
            if mine is not None and mine in seen[what]:
                raise EvidenceParseError(
                    f"nvidia-smi CSV: GPU {what} {mine} listed twice (a capture of several --loop samples? give one sample)",
                    number,
                    line,
                )
        for what, mine in (("index", gpu.index), ("UUID", gpu.uuid), ("bus id", gpu.bus_id)):
            if mine is not None:
                seen[what].add(mine)
        report.gpus.append(gpu)
    return report
