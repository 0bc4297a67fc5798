"""Read the GPUs a framework saw from its log (TensorFlow 1.x to 2.x, PyTorch probes).

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

Lines are found anywhere in the text, so timestamps, absl prefixes
(`I0000 00:00:1712025345.870067  431105 service.cc:145]`) and program output between
them do not matter. A device-creation line cut by wrapping is glued to the next lines.

Merging: facts about one device index from several lines are combined; for each field
the first value seen wins (a later session's `freeMemory` does not overwrite it).
HumanReadableNumBytes sizes have two decimals, so byte figures are as exact as the log.
A log that names no GPU device is an error, not an empty result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpushare_conformance.evidence.errors import EvidenceParseError
from gpushare_conformance.evidence.units import human_bytes_to_int

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "total_memory_bytes": self.total_memory_bytes,
            "free_memory_bytes": self.free_memory_bytes,
            "limit_mib": self.limit_mib,
            "name": self.name,
            "pci_bus_id": self.pci_bus_id,
            "compute_capability": self.compute_capability,
        }


@dataclass
class TfLogReport:
    devices: list[TfDevice]

    def to_dict(self) -> dict[str, Any]:
        return {"devices": [device.to_dict() for device in self.devices]}


class _Merger:
    def __init__(self) -> None:
        self.devices: dict[int, TfDevice] = {}

    def set(self, index: int, **facts: Any) -> None:
        device = self.devices.setdefault(index, TfDevice(index=index))
        for key, value in facts.items():
            if value is not None and getattr(device, key) is None:
                setattr(device, key, value)


def _size(match: re.Match[str], number: int, line: str) -> int:
    try:
        return human_bytes_to_int(match.group("size"))
    except ValueError as exc:
        raise EvidenceParseError(f"TensorFlow log: {exc}", number, line) from None


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
            merger.set(index, name=name.group("name"), compute_capability=f"{name.group('major')}.{name.group('minor')}")
        elif _TF1_NAME_ALONE.match(text.strip()):
            merger.set(index, name=_TF1_NAME_ALONE.match(text.strip()).group("name"))
        capability = _TF1_MAJOR_MINOR.match(text.strip())
        if capability:
            merger.set(index, compute_capability=f"{capability.group('major')}.{capability.group('minor')}")
        pci = _TF1_PCI.search(text)
        if pci:
            merger.set(index, pci_bus_id=pci.group("pci"))
    for pattern, key in ((_TOTAL, "total_memory_bytes"), (_DEVICE_MEMORY, "total_memory_bytes"), (_FREE, "free_memory_bytes")):
        match = pattern.search(text)
        if match:
            merger.set(index, **{key: _size(match, number, line)})


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
            merger.set(int(meminfo.group("index")), free_memory_bytes=int(meminfo.group("free")), total_memory_bytes=int(meminfo.group("total")))
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
                index,
                name=props.group("name"),
                compute_capability=f"{props.group('major')}.{props.group('minor')}",
                total_memory_bytes=int(props.group("mib")) << 20,
            )
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
            "or PyTorch's 'torch.cuda.mem_get_info(<i>): (<free>, <total>)' / '_CudaDeviceProperties(...)'",
            None,
            None,
        )
    return TfLogReport(devices=[merger.devices[index] for index in sorted(merger.devices)])
