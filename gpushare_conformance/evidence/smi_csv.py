"""`nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`.

With a header the columns name themselves. Without one the caller must say which
fields were queried; the only exception is `CANONICAL_QUERY`, the query the suite
itself issues, accepted when every row has its shape (index, name, a `GPU-` UUID,
three memory figures with total >= used and total >= free). Anything else headerless
is an error rather than a guess.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence

from gpushare_conformance.evidence.errors import EvidenceParseError
from gpushare_conformance.evidence.smi_report import GpuInfo, NvidiaSmiReport

CANONICAL_QUERY: tuple[str, ...] = ("index", "name", "uuid", "memory.total", "memory.used", "memory.free")

PLACEHOLDERS = frozenset(
    {"[N/A]", "N/A", "[Not Supported]", "[Insufficient Permissions]", "[Unknown Error]", "[GPU is lost]", ""}
)

_HEADER_FIELD = re.compile(r"^(?P<field>[a-z][a-z0-9_.]*)(?:\s*\[(?P<unit>[^\]]*)\])?$")
_MIB = re.compile(r"^(?P<n>\d+)\s*(?:MiB)?$")
_INT = re.compile(r"^\d+$")
_MEMORY_FIELDS = {"memory.total": "memory_total_mib", "memory.used": "memory_used_mib", "memory.free": "memory_free_mib"}
_KNOWN = frozenset({"index", "name", "uuid", "pci.bus_id", "driver_version", "mig.mode.current", "memory.total", "memory.used", "memory.free"})
_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id", "fb_memory_usage.total": "memory.total"}


def _rows(text: str) -> list[tuple[int, list[str]]]:
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            out.append((number, [cell.strip() for cell in next(csv.reader([line.strip()], skipinitialspace=True))]))
    return out


def _header_fields(cells: list[str]) -> list[str] | None:
    """Field names if this row is a header (every cell a field name), else None."""
    fields = []
    for cell in cells:
        match = _HEADER_FIELD.match(cell)
        if not match:
            return None
        fields.append(_ALIASES.get(match.group("field"), match.group("field")))
    return fields


def looks_like_csv(text: str, fields_given: bool = False) -> bool:
    """A header row naming a known field, or rows of comma-separated values.

    Without a header or a field list, rows must start with an integer (the index):
    prose that happens to contain commas is not taken for a headerless query.
    """
    rows = _rows(text)
    if not rows or not all(len(cells) > 1 for _, cells in rows[:3]):
        return False
    header = _header_fields(rows[0][1])
    if header is not None:
        return any(field in _KNOWN for field in header)
    return fields_given or all(_INT.match(cells[0]) for _, cells in rows)


def _value(raw: str) -> str | None:
    return None if raw in PLACEHOLDERS else raw


def _mib(raw: str, field: str, number: int, line: str) -> int | None:
    value = _value(raw)
    if value is None:
        return None
    match = _MIB.match(value)
    if not match:
        raise EvidenceParseError(f"nvidia-smi CSV: {field} must be '<n> MiB' or a placeholder like [N/A], got {raw!r}", number, line)
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


def parse_csv(text: str, fields: Sequence[str] | None = None) -> NvidiaSmiReport:
    """Parse the CSV form; `fields` is the `--query-gpu` list for headerless output."""
    lines = text.splitlines()
    rows = _rows(text)
    if not rows:
        raise EvidenceParseError("nvidia-smi CSV: input is empty")
    header = _header_fields(rows[0][1])
    if header is not None:
        if fields is not None and list(fields) != header:
            raise EvidenceParseError(
                f"nvidia-smi CSV: header fields {header} differ from the given fields {list(fields)}", rows[0][0], lines[rows[0][0] - 1]
            )
        columns, data = header, rows[1:]
    elif fields is not None:
        columns, data = [_ALIASES.get(f.strip(), f.strip()) for f in fields], rows
    elif _canonical_fits(rows):
        columns, data = list(CANONICAL_QUERY), rows
    else:
        raise EvidenceParseError(
            "nvidia-smi CSV without a header: pass the --query-gpu field list (fields=, CLI --fields); "
            f"only the suite's own query {','.join(CANONICAL_QUERY)} is recognised by shape",
            rows[0][0],
            lines[rows[0][0] - 1],
        )
    if not data:
        raise EvidenceParseError("nvidia-smi CSV: a header but no GPU rows", rows[0][0], lines[rows[0][0] - 1])
    if not any(column in ("index", "name", "uuid", *_MEMORY_FIELDS) for column in columns):
        raise EvidenceParseError(
            f"nvidia-smi CSV: the fields {columns} say nothing about a card; query index, name, uuid or memory.*"
        )
    report = NvidiaSmiReport(format="csv", driver_version=None, cuda_version=None, gpus=[])
    for position, (number, cells) in enumerate(data):
        line = lines[number - 1]
        if len(cells) != len(columns):
            raise EvidenceParseError(f"nvidia-smi CSV: expected {len(columns)} values ({', '.join(columns)}), got {len(cells)}", number, line)
        record = dict(zip(columns, cells))
        if _header_fields(cells) is not None and not any(_INT.match(cell) for cell in cells):
            raise EvidenceParseError("nvidia-smi CSV: a second header row", number, line)
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
                setattr(gpu, attribute, _mib(record[column], column, number, line))
        known = {"index", "name", "uuid", "pci.bus_id", "mig.mode.current", "driver_version", *_MEMORY_FIELDS}
        gpu.other = {column: _value(value) for column, value in record.items() if column not in known}
        if "driver_version" in record:
            driver = _value(record["driver_version"])
            if report.driver_version not in (None, driver):
                raise EvidenceParseError(f"nvidia-smi CSV: driver_version differs between rows ({report.driver_version} vs {driver})", number, line)
            report.driver_version = driver
        if any(existing.index == gpu.index for existing in report.gpus):
            raise EvidenceParseError(f"nvidia-smi CSV: GPU index {gpu.index} listed twice", number, line)
        report.gpus.append(gpu)
    return report
