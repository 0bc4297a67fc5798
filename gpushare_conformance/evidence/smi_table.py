"""The default `nvidia-smi` table, drivers 396 to 610.

The layouts differ in width (79/89/91 columns), in a third `MIG M.` row per card
(450+), in the rule under the header (`+---+` from 580) and in the header's words
(610 says `KMD Version` and `CUDA UMD Version`). Rather than slicing fixed columns,
rows are split on `|`, so copies with collapsed whitespace or leading indentation
read the same; a row wrapped by a terminal (no closing `|`) is glued to the next
line. Text outside the table (prompts, timestamps, prose) is ignored, but every row
inside the GPU and MIG tables must be understood: an unknown row is an error, never
a card silently dropped.
"""

from __future__ import annotations

import re

from gpushare_conformance.evidence.errors import EvidenceParseError
from gpushare_conformance.evidence.smi_report import GpuInfo, MigDevice, NvidiaSmiReport
from gpushare_conformance.evidence.units import DIGITS

HEADER = re.compile(r"^\|\s*NVIDIA-SMI\s+(?P<smi>[^\s|]+)")
_DRIVER = re.compile(r"(?:Driver|KMD)\s+Version:\s*(?P<v>[^\s|]+)")
_CUDA = re.compile(r"CUDA\s+(?:UMD\s+)?Version:\s*(?P<v>[^\s|]+)")
_RULE = re.compile(r"^[+|][-=+|\s]*[+|]$")
_GPU_CELL = re.compile(rf"^(?P<index>{DIGITS})\s+(?P<name>\S.*?)\s*+(?P<persistence>\bOn|\bOff|N/A|WDDM|TCC)$")
_MAX_CELL = 256  # a cell of a card's row is at most a few dozen characters; longer is not a row
_BUS_ID = re.compile(r"^(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\b")
_MEMORY = re.compile(rf"^(?P<used>{DIGITS})\s*MiB\s*/\s*(?P<total>{DIGITS})\s*MiB$")
_MIG_CELL = re.compile(rf"^(?P<gpu>{DIGITS})\s+(?P<gi>{DIGITS}|N/A)\s+(?P<ci>{DIGITS}|N/A)\s+(?P<dev>{DIGITS}|N/A)$")
_MIG_MEMORY = re.compile(rf"(?<![0-9])(?P<used>{DIGITS})\s*+MiB\s*+/\s*+(?P<total>{DIGITS})\s*+MiB")

_UNKNOWN_MEMORY = re.compile(r"N/A|Not Supported")  # MIG-enabled cards (580+), Jetson/iGPU

_GPU_ROW_HINT = "'|   0  <name>  <On|Off> | <bus id> <On|Off> | <ECC> |'"
_MEMORY_HINT = "a memory cell '<used>MiB / <total>MiB', 'N/A' or 'Not Supported'"


def looks_like_table(text: str) -> bool:
    return any(HEADER.match(line.strip()) for line in text.splitlines())


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Stripped lines with their 1-based numbers; table rows wrapped by a terminal glued back.

    A row is continued on the next line when it does not end with `|`/`+`, or when
    the next line does not start with `|`/`+` but ends with one (a wrap that fell
    right after a `|`). At most two continuation lines per row.
    """
    out: list[tuple[int, str]] = []
    glued = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        previous = out[-1][1] if out else ""
        in_row = previous.startswith(("|", "+"))
        unfinished = in_row and not previous.endswith(("|", "+"))
        tail = in_row and stripped and not stripped.startswith(("|", "+")) and stripped.endswith(("|", "+"))
        if stripped and glued < 2 and (unfinished or tail):
            out[-1] = (out[-1][0], (previous + raw).strip())
            glued += 1
            continue
        glued = 0
        out.append((number, stripped))
    return out


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip("|").split("|")]


def _na(value: str) -> str | None:
    return None if value in ("", "N/A") else value


class _TableParser:
    def __init__(self) -> None:
        self.report: NvidiaSmiReport | None = None
        self.phase = "before"  # before, gpu_head, gpu_rows, mig_head, mig_rows, other
        self.gpu: GpuInfo | None = None  # card whose rows are being read
        self.by_index: dict[int, GpuInfo] = {}
        self.gpu_rows = 0
        self.mig: MigDevice | None = None
        self.last = (0, "")

    def fail(self, message: str, number: int, line: str) -> EvidenceParseError:
        return EvidenceParseError(f"nvidia-smi table: {message}", number, line)

    def parse(self, text: str) -> NvidiaSmiReport:
        for number, line in _logical_lines(text):
            self.last = (number, line)
            self.feed(number, line)
        number, line = self.last
        if self.report is None:
            raise EvidenceParseError("nvidia-smi table: no '| NVIDIA-SMI <version> ...' header line")
        if self.gpu is not None and self.gpu_rows < 2:
            raise self.fail(
                f"input ended inside the rows of GPU {self.gpu.index}; expected {_MEMORY_HINT}", number, line
            )
        if not self.report.gpus:
            raise self.fail("the table has a header but no GPU rows", number, line)
        return self.report

    def feed(self, number: int, line: str) -> None:
        if HEADER.match(line):
            if self.report is not None:
                raise self.fail("a second nvidia-smi header; give one capture at a time", number, line)
            self.report = NvidiaSmiReport(
                format="table",
                nvidia_smi_version=HEADER.match(line).group("smi"),
                driver_version=_match_value(_DRIVER, line),
                cuda_version=_match_value(_CUDA, line),
                gpus=[],
            )
            self.phase = "gpu_head"
            return
        if self.phase == "before":
            return
        if not line.startswith(("|", "+")):
            self.outside_table(number, line)
            return
        title = _cells(line)[0] if not _RULE.match(line) else ""
        if title.startswith("MIG devices:"):
            self.close_block(number, line)
            self.phase = "mig_head"
            return
        if title.startswith("Processes:"):
            self.close_block(number, line)
            self.phase = "other"
            return
        if self.phase in ("gpu_head", "mig_head"):
            if _RULE.match(line) and "=" in line:
                self.phase = "gpu_rows" if self.phase == "gpu_head" else "mig_rows"
            return
        if self.phase == "gpu_rows":
            self.gpu_row(number, line)
        elif self.phase == "mig_rows":
            self.mig_row(number, line)

    def outside_table(self, number: int, line: str) -> None:
        if not line:
            return
        if self.phase == "gpu_rows" and self.gpu is not None:
            raise self.fail(f"the rows of GPU {self.gpu.index} stop at a line that is not a table row", number, line)
        if self.phase == "mig_rows" and self.mig is not None:
            raise self.fail("a MIG device row stops at a line that is not a table row", number, line)

    def close_block(self, number: int, line: str) -> None:
        if self.gpu is not None and self.gpu_rows < 2:
            raise self.fail(f"GPU {self.gpu.index} has no memory row; expected {_MEMORY_HINT}", number, line)
        self.gpu, self.gpu_rows, self.mig = None, 0, None

    def gpu_row(self, number: int, line: str) -> None:
        assert self.report is not None
        if _RULE.match(line):
            self.close_block(number, line)
            return
        cells = _cells(line)
        if self.gpu is None:
            match = _GPU_CELL.match(cells[0]) if len(cells) >= 3 and len(cells[0]) <= _MAX_CELL else None
            if not match:
                raise self.fail(f"expected a GPU row {_GPU_ROW_HINT}", number, line)
            bus = _BUS_ID.match(cells[1])
            self.gpu = GpuInfo(
                index=int(match.group("index")),
                name=match.group("name"),
                memory_used_mib=None,
                memory_total_mib=None,
                bus_id=bus.group("bus") if bus else None,
            )
            if self.gpu.index in self.by_index:
                raise self.fail(f"GPU index {self.gpu.index} listed twice", number, line)
            self.by_index[self.gpu.index] = self.gpu
            self.report.gpus.append(self.gpu)
            self.gpu_rows = 1
            return
        if self.gpu_rows == 1:
            memory = _MEMORY.match(cells[1]) if len(cells) >= 3 else None
            if memory:
                self.gpu.memory_used_mib = int(memory.group("used"))
                self.gpu.memory_total_mib = int(memory.group("total"))
            elif len(cells) < 3 or not _UNKNOWN_MEMORY.search(cells[1]):
                raise self.fail(f"GPU {self.gpu.index}: expected {_MEMORY_HINT}", number, line)
            self.gpu_rows = 2
            return
        if self.gpu_rows == 2 and len(cells) >= 3 and not cells[0] and not cells[1]:
            self.gpu.mig_mode = _na(cells[2])
            self.gpu_rows = 3
            return
        raise self.fail(
            f"GPU {self.gpu.index}: unexpected extra row; expected the rule '+---+' closing the card", number, line
        )

    def mig_row(self, number: int, line: str) -> None:
        assert self.report is not None
        if _RULE.match(line):
            self.mig = None
            return
        cells = _cells(line)
        if len(cells) == 1 and cells[0].startswith("No MIG devices found"):
            return
        match = _MIG_CELL.match(cells[0]) if len(cells) >= 2 else None
        if match:
            memory = _MIG_MEMORY.search(cells[1])
            if not memory and not _UNKNOWN_MEMORY.search(cells[1]):
                raise self.fail(f"MIG device: expected {_MEMORY_HINT}", number, line)
            gpu_index = int(match.group("gpu"))
            owner = self.by_index.get(gpu_index)
            if owner is None:
                raise self.fail(f"MIG device on GPU {gpu_index}, which the GPU table does not list", number, line)
            self.mig = MigDevice(
                gpu_index=gpu_index,
                gpu_instance_id=_int_or_none(match.group("gi")),
                compute_instance_id=_int_or_none(match.group("ci")),
                device_index=_int_or_none(match.group("dev")),
                memory_used_mib=int(memory.group("used")) if memory else None,
                memory_total_mib=int(memory.group("total")) if memory else None,
            )
            owner.mig_devices.append(self.mig)
            return
        if self.mig is not None and cells and not cells[0]:
            return  # BAR1 / continuation line of the current instance
        raise self.fail(
            "expected a MIG device row '|  <gpu>  <gi>  <ci>  <dev>  | <used>MiB / <total>MiB | ...'", number, line
        )


def _match_value(pattern: re.Pattern[str], line: str) -> str | None:
    match = pattern.search(line)
    return _na(match.group("v")) if match else None


def _int_or_none(value: str) -> int | None:
    return None if value == "N/A" else int(value)


def parse_table(text: str) -> NvidiaSmiReport:
    """Parse one capture of the default table."""
    return _TableParser().parse(text)
