"""Read the GPUs a framework saw from its log (TensorFlow 1.x to 2.x, PyTorch probes and OOM errors).

Forms read (all TensorFlow ones come from gpu_device.cc):

- TF 1.0-2.0 `Found device <i> with properties:` followed by continuation lines
  without timestamp: `name: <n> major: 7 minor: 0 ...`, `pciBusID: ...`,
  `totalMemory: 4.21GiB freeMemory: 3.91GiB` (1.0-1.3: `Total memory:`/`Free memory:`).
- TF 2.1-2.5 continuation lines `pciBusID: ... name: ... computeCapability: 7.0` and
  `... deviceMemorySize: 15.78GiB ...` (the card total; no free figure).
- TF 1.0-1.7 `Creating TensorFlow device (/gpu:0[ with N MB memory]) -> [physical GPU ](device: 0, name: ..., pci bus id: ...)`.
- TF 1.8-2.5 `Created TensorFlow device (/job:.../device:GPU:0 with N MB memory) -> physical GPU (device: 0, ...)`.
- TF 2.6+ `Created device /job:.../device:GPU:0 with N MB memory:  -> device: 0, name: ..., pci bus id: ...`.
  `N MB` is the allocator limit (bytes >> 20), reported as `limit_mib`, never as the total.
- PyTorch, as a probe prints it (the line form this project defines):
  `torch.cuda.mem_get_info(<i>): (<free bytes>, <total bytes>)` (`=` also accepted),
  and the repr of `torch.cuda.get_device_properties(i)`, optionally prefixed with
  `get_device_properties(<i>): ` or `cuda:<i>: `:
  `_CudaDeviceProperties(name='...', major=7, minor=0, total_memory=16160MB, ...)`
  (`total_memory` printed in MiB, so bytes = N << 20). A repr without an index
  prefix is numbered by order of appearance; mixing both kinds is an error.
- PyTorch's CUDA out-of-memory message (c10/cuda/CUDACachingAllocator.cpp), which
  carries the total cudaMemGetInfo reported to the framework, in both eras:
  before 2.1 `CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 1024.00 MiB
  total capacity; 1000.00 MiB already allocated; 0 bytes free; ...)` (1.x: `... cached)`,
  with a memory fraction `... allowed; ...`), from 2.1 `CUDA out of memory. Tried to
  allocate 2.00 GiB. GPU 0 has a total capacity of 6.00 GiB of which 0 bytes is free.
  ...` (2.1 itself spells it `total capacty of`). Sizes are PyTorch's format_size:
  `<n> bytes` (also `B`), else two decimals in KiB, MiB or GiB. A message may be
  wrapped over up to 4 lines. A message that starts (`CUDA out of memory. Tried to
  allocate`) but reads as neither form is an error; the bare words
  `CUDA out of memory` (a comment, a FAQ) are not a device line. The free figure of
  an OOM message is the state at the failure, so it is not reported as
  `free_memory_bytes`.

Lines are found anywhere in the text, so timestamps, absl prefixes
(`I0000 00:00:1712025345.870067  431105 service.cc:145]`) and program output between
them do not matter. A device-creation line cut by wrapping is glued to the next lines.

Merging: facts about one device index from several lines are combined; for each field
the first value seen wins (a later session's `freeMemory` does not overwrite it).
HumanReadableNumBytes sizes have two decimals, so byte figures are as exact as the log.

Totals must agree: every line that states a device's total (TF `totalMemory:` /
`Total memory:` / `deviceMemorySize:`, `mem_get_info`, `_CudaDeviceProperties`, an OOM
message) is checked against every earlier one for that index, within what each
printed precision allows (`4.21GiB` is 4.205-4.215 GiB, `total_memory=4309MB` is
4309-4310 MiB, `mem_get_info` is exact). Two totals that cannot be the same number
are an error naming both lines. `total_memory_source` says which line form gave the
reported total: `tf-total-memory`, `tf-device-memory-size`, `torch-mem-get-info`,
`torch-device-properties`, `torch-oom-pre-2.1` or `torch-oom-2.1+`.
A log that names no GPU device is an error, not an empty result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpushare_conformance.evidence.errors import EvidenceParseError
from gpushare_conformance.evidence.units import (
    exact_bounds,
    human_bytes_to_int,
    mib_floor_bounds,
    printed_size_bounds,
    torch_size_to_int,
)

_SIZE = r"\d+(?:\.\d+)?\s*[KMGT]?i?B"
_FOUND = re.compile(r"Found device (?P<index>\d+) with properties:(?P<rest>.*)$")
_TF2_PROPS = re.compile(r"pciBusID:\s*(?P<pci>\S+)\s+name:\s*(?P<name>.+?)\s+computeCapability:\s*(?P<cc>\d+\.\d+)")
_TF1_NAME = re.compile(r"(?:^|\s)name:\s*(?P<name>.+?)\s+major:\s*(?P<major>\d+)\s+minor:\s*(?P<minor>\d+)")
_TF1_NAME_ALONE = re.compile(r"^name:\s*(?P<name>.+?)\s*$")
_TF1_MAJOR_MINOR = re.compile(r"^major:\s*(?P<major>\d+)\s+minor:\s*(?P<minor>\d+)")
_TF1_PCI = re.compile(r"(?:^|\s)pciBusID:?\s+(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")
_TOTAL = re.compile(rf"(?:totalMemory:|Total memory:)\s*(?P<size>{_SIZE})")
_FREE = re.compile(rf"(?:freeMemory:|Free memory:)\s*(?P<size>{_SIZE})")
_DEVICE_MEMORY = re.compile(rf"deviceMemorySize:\s*(?P<size>{_SIZE})")
_CREATE_OLD = re.compile(
    r"Creat(?:ed|ing) TensorFlow device \((?P<tfdev>[^\s)]+)(?: with (?P<mb>\d+) MB memory)?\)\s*->\s*"
    r"(?:physical GPU )?\(device:\s*(?P<index>\d+),\s*name:\s*(?P<name>.*?),\s*pci bus id:\s*(?P<pci>[^,)\s]+)"
    r"(?:,\s*compute capability:\s*(?P<cc>\d+\.\d+))?\)"
)
_CREATE_NEW = re.compile(
    r"Created device (?P<tfdev>\S+) with (?P<mb>\d+) MB memory:\s*->\s*device:\s*(?P<index>\d+),\s*"
    r"name:\s*(?P<name>.*?),\s*pci bus id:\s*(?P<pci>[^,\s]+)(?:,\s*compute capability:\s*(?P<cc>\d+\.\d+))?"
)
_CREATE_MARKER = re.compile(r"Creat(?:ed|ing) TensorFlow device|Created device /")
_TORCH_MEMINFO = re.compile(
    r"mem_get_info\(\s*(?:device\s*=\s*)?['\"]?(?:cuda:)?(?P<index>\d+)['\"]?\s*\)\s*[:=]\s*\(\s*(?P<free>\d+)\s*,\s*(?P<total>\d+)\s*\)"
)
_TORCH_PROPS = re.compile(
    r"(?:(?:get_device_properties\(\s*(?P<index1>\d+)\s*\)|cuda:(?P<index2>\d+))\s*[:=]?\s*)?"
    r"_CudaDeviceProperties\(name=(?P<q>['\"])(?P<name>.*?)(?P=q),\s*major=(?P<major>\d+),\s*minor=(?P<minor>\d+),"
    r"(?P<between>.*?)total_memory=(?P<mib>\d+)MB"
)
_TORCH_MARKER = "_CudaDeviceProperties("
_TORCH_SIZE = r"\d+(?:\.\d+)?\s*(?:bytes|B|KiB|MiB|GiB)"
_OOM_MARKER = re.compile(r"CUDA out of memory")
_OOM_START = re.compile(r"CUDA out of memory\.\s*Tried to allocate\b")
_OOM_PRE_21 = re.compile(
    rf"CUDA out of memory\.\s*Tried to allocate\s+(?P<request>{_TORCH_SIZE})\s*"
    rf"\(\s*GPU\s+(?P<index>\d+)\s*;\s*(?P<total>{_TORCH_SIZE})\s+total\s+capacity\s*;"
)
_OOM_21 = re.compile(
    rf"CUDA out of memory\.\s*Tried to allocate\s+(?P<request>{_TORCH_SIZE})\s*\.\s*"
    rf"GPU\s+(?P<index>\d+)\s+has\s+a\s+total\s+capac(?:i)?ty\s+of\s+(?P<total>{_TORCH_SIZE})\s+"
    rf"of\s+which\s+(?P<free>{_TORCH_SIZE})\s+is\s+free\b"
)
_OOM_FORMS = ((_OOM_21, "torch-oom-2.1+"), (_OOM_PRE_21, "torch-oom-pre-2.1"))
_OOM_EXPECTED = (
    "PyTorch log: a CUDA out-of-memory message that reads as neither "
    "'CUDA out of memory. Tried to allocate <size> (GPU <i>; <size> total capacity; ...' (before 2.1) nor "
    "'CUDA out of memory. Tried to allocate <size>. GPU <i> has a total capacity of <size> of which <size> is free. ...' "
    "(2.1 and later); sizes as '<n> bytes' or '<x.xx> KiB|MiB|GiB'"
)
_SOURCE_WORDS = {
    "tf-total-memory": "TensorFlow's 'totalMemory:'",
    "tf-device-memory-size": "TensorFlow's 'deviceMemorySize:'",
    "torch-mem-get-info": "torch.cuda.mem_get_info",
    "torch-device-properties": "_CudaDeviceProperties total_memory",
    "torch-oom-pre-2.1": "PyTorch's out-of-memory message",
    "torch-oom-2.1+": "PyTorch's out-of-memory message",
}
_NO_DEVICE = re.compile(r"CUDA_ERROR_NO_DEVICE|no CUDA-capable device is detected")


@dataclass
class TfDevice:
    """One GPU as the framework saw it; None means the log did not say."""

    index: int
    total_memory_bytes: int | None = None
    free_memory_bytes: int | None = None
    limit_mib: int | None = None
    name: str | None = None
    pci_bus_id: str | None = None
    compute_capability: str | None = None
    total_memory_source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "total_memory_bytes": self.total_memory_bytes,
            "free_memory_bytes": self.free_memory_bytes,
            "limit_mib": self.limit_mib,
            "name": self.name,
            "pci_bus_id": self.pci_bus_id,
            "compute_capability": self.compute_capability,
            "total_memory_source": self.total_memory_source,
        }


@dataclass
class TfLogReport:
    devices: list[TfDevice]

    def to_dict(self) -> dict[str, Any]:
        return {"devices": [device.to_dict() for device in self.devices]}


@dataclass
class _Total:
    """One line's statement of a device total, with the byte range its printing allows."""

    value: int
    low: int
    high: int
    source: str
    shown: str
    line_number: int
    line: str


class _Merger:
    def __init__(self) -> None:
        self.devices: dict[int, TfDevice] = {}
        self.totals: dict[int, list[_Total]] = {}

    def set(self, index: int, **facts: Any) -> None:
        device = self.devices.setdefault(index, TfDevice(index=index))
        for key, value in facts.items():
            if value is not None and getattr(device, key) is None:
                setattr(device, key, value)

    def set_total(self, index: int, total: _Total) -> None:
        """Record a total; the first one is reported, every later one must agree with all before it."""
        for earlier in self.totals.get(index, []):
            if total.low > earlier.high or total.high < earlier.low:
                raise EvidenceParseError(
                    f"framework log: GPU {index} total {total.shown} ({_SOURCE_WORDS[total.source]}) disagrees with "
                    f"{earlier.shown} ({_SOURCE_WORDS[earlier.source]}) on line {earlier.line_number}: "
                    f"{earlier.line.strip()[:120]!r}",
                    total.line_number,
                    total.line,
                )
        self.totals.setdefault(index, []).append(total)
        device = self.devices.setdefault(index, TfDevice(index=index))
        if device.total_memory_bytes is None:
            device.total_memory_bytes = total.value
            device.total_memory_source = total.source


def _size(match: re.Match[str], number: int, line: str) -> int:
    try:
        return human_bytes_to_int(match.group("size"))
    except ValueError as exc:
        raise EvidenceParseError(f"TensorFlow log: {exc}", number, line) from None


def _tf_total(match: re.Match[str], source: str, number: int, line: str) -> _Total:
    value = _size(match, number, line)
    low, high = printed_size_bounds(match.group("size"))
    return _Total(value, low, high, source, match.group("size"), number, line)


def _oom_totals(lines: list[str], i: int) -> list[tuple[int, _Total]]:
    """(index, total) for each out-of-memory message starting on line i, glued over wrapped lines."""
    line, number = lines[i], i + 1
    out = []
    for marker in _OOM_MARKER.finditer(line):
        following = lines[i + 1 : i + 4]
        # a wrap at a space keeps the words apart; a hard wrap at a column may cut a word
        candidates = [
            " ".join([line[marker.start() :].strip(), *(part.strip() for part in following)]),
            line[marker.start() :] + "".join(following),
        ]
        if not _OOM_START.match(candidates[0]) and not _OOM_START.match(candidates[1]):
            continue  # the words alone, not a message of the caching allocator
        for text in candidates:
            found = next(((m, source) for pattern, source in _OOM_FORMS if (m := pattern.match(text))), None)
            if found:
                break
        else:
            raise EvidenceParseError(_OOM_EXPECTED, number, line)
        match, source = found
        shown = " ".join(match.group("total").split())
        try:
            value = torch_size_to_int(shown)
            low, high = printed_size_bounds(shown)
        except ValueError as exc:
            raise EvidenceParseError(f"PyTorch log: {exc}", number, line) from None
        out.append((int(match.group("index")), _Total(value, low, high, source, shown, number, line)))
    return out


def _creation(lines: list[str], i: int) -> tuple[re.Match[str] | None, int]:
    """Match a device-creation line, gluing up to 3 following lines if it was wrapped."""
    text = lines[i]
    for extra in range(0, 4):
        if extra:
            if i + extra >= len(lines):
                break
            text = text.rstrip("\n") + lines[i + extra]
        for pattern in (_CREATE_NEW, _CREATE_OLD):
            match = pattern.search(text)
            if match:
                return match, extra
        if extra == 0:
            continue
        # a wrap may also have eaten the space at the break
        spaced = " ".join(part.strip() for part in lines[i : i + extra + 1])
        for pattern in (_CREATE_NEW, _CREATE_OLD):
            match = pattern.search(spaced)
            if match:
                return match, extra
    return None, 0


def _continuation(merger: _Merger, index: int, text: str, number: int, line: str) -> None:
    """Facts from the lines that follow `Found device <i> with properties:`."""
    props = _TF2_PROPS.search(text)
    if props:
        merger.set(index, pci_bus_id=props.group("pci"), name=props.group("name"), compute_capability=props.group("cc"))
    else:
        name = _TF1_NAME.search(text)
        if name:
            merger.set(
                index, name=name.group("name"), compute_capability=f"{name.group('major')}.{name.group('minor')}"
            )
        elif _TF1_NAME_ALONE.match(text.strip()):
            merger.set(index, name=_TF1_NAME_ALONE.match(text.strip()).group("name"))
        capability = _TF1_MAJOR_MINOR.match(text.strip())
        if capability:
            merger.set(index, compute_capability=f"{capability.group('major')}.{capability.group('minor')}")
        pci = _TF1_PCI.search(text)
        if pci:
            merger.set(index, pci_bus_id=pci.group("pci"))
    for pattern, source in ((_TOTAL, "tf-total-memory"), (_DEVICE_MEMORY, "tf-device-memory-size")):
        match = pattern.search(text)
        if match:
            merger.set_total(index, _tf_total(match, source, number, line))
    free = _FREE.search(text)
    if free:
        merger.set(index, free_memory_bytes=_size(free, number, line))


def parse_tf_log(text: str) -> TfLogReport:
    """Devices found in a TensorFlow or PyTorch log, merged per device index."""
    lines = text.splitlines()
    merger = _Merger()
    found: int | None = None  # device whose `Found device` continuation lines may follow
    bare_props = 0
    indexed_props = False
    no_device_line: tuple[int, str] | None = None
    i = 0
    while i < len(lines):
        line, number = lines[i], i + 1
        i += 1
        found_match = _FOUND.search(line)
        if found_match:
            found = int(found_match.group("index"))
            merger.set(found)
            _continuation(merger, found, found_match.group("rest"), number, line)
            continue
        if _CREATE_MARKER.search(line):
            match, extra = _creation(lines, i - 1)
            if match is None:
                raise EvidenceParseError(
                    "TensorFlow log: a device-creation line that does not read as "
                    "'Created device <tf device> with <N> MB memory:  -> device: <i>, name: ..., pci bus id: ...' "
                    "or 'Created TensorFlow device (<tf device> with <N> MB memory) -> physical GPU (device: <i>, ...)'",
                    number,
                    line,
                )
            i += extra
            merger.set(
                int(match.group("index")),
                limit_mib=int(match.group("mb")) if match.group("mb") else None,
                name=match.group("name"),
                pci_bus_id=match.group("pci"),
                compute_capability=match.group("cc"),
            )
            continue
        meminfo = _TORCH_MEMINFO.search(line)
        if meminfo:
            index, total = int(meminfo.group("index")), int(meminfo.group("total"))
            merger.set(index, free_memory_bytes=int(meminfo.group("free")))
            merger.set_total(
                index, _Total(total, *exact_bounds(total), "torch-mem-get-info", f"{total} bytes", number, line)
            )
            continue
        if _TORCH_MARKER in line:
            props = _TORCH_PROPS.search(line)
            if not props:
                raise EvidenceParseError(
                    "PyTorch log: expected \"_CudaDeviceProperties(name='<name>', major=<n>, minor=<n>, total_memory=<N>MB, ...)\"",
                    number,
                    line,
                )
            explicit = props.group("index1") or props.group("index2")
            if explicit is not None:
                indexed_props = True
                index = int(explicit)
            else:
                index = bare_props
                bare_props += 1
            if indexed_props and bare_props:
                raise EvidenceParseError(
                    "PyTorch log: device-properties lines with and without an index prefix; "
                    "prefix every one with 'get_device_properties(<i>): '",
                    number,
                    line,
                )
            merger.set(
                index, name=props.group("name"), compute_capability=f"{props.group('major')}.{props.group('minor')}"
            )
            mib = int(props.group("mib"))
            merger.set_total(
                index, _Total(mib << 20, *mib_floor_bounds(mib), "torch-device-properties", f"{mib}MB", number, line)
            )
            continue
        if _OOM_MARKER.search(line):
            totals = _oom_totals(lines, i - 1)
            for index, total in totals:
                merger.set_total(index, total)
            if totals:
                continue
        if found is not None:
            _continuation(merger, found, line, number, line)
        if no_device_line is None and _NO_DEVICE.search(line):
            no_device_line = (number, line)
    if not merger.devices:
        if no_device_line is not None:
            raise EvidenceParseError("the log reports that CUDA found no device", *no_device_line)
        raise EvidenceParseError(
            "no GPU device lines: expected TensorFlow's 'Found device <i> with properties:', "
            "'Created [TensorFlow ]device ... with <N> MB memory', 'Creating TensorFlow device', "
            "or PyTorch's 'torch.cuda.mem_get_info(<i>): (<free>, <total>)' / '_CudaDeviceProperties(...)' / "
            "'CUDA out of memory. Tried to allocate ... (GPU <i>; <size> total capacity; ...' / "
            "'... GPU <i> has a total capacity of <size> ...'",
            None,
            None,
        )
    return TfLogReport(devices=[merger.devices[index] for index in sorted(merger.devices)])
