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
  `CUDA out of memory` (a comment, a FAQ) are not a device line. The message's free
  figure (`0 bytes free;` before 2.1, `of which 0 bytes is free` from 2.1; what
  cudaMemGetInfo said at the failure) is reported as `free_memory_bytes` when no
  earlier line gave one.

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
`torch-device-properties`, `torch-oom-pre-2.1` or `torch-oom-2.1+`. Free memory is
carried the same way: the first figure seen is reported, and `free_memory_source` says
which line form gave it: `tf-free-memory`, `torch-mem-get-info`, `torch-oom-pre-2.1` or
`torch-oom-2.1+`.
A log that names no GPU device is an error, not an empty result.

Any input is read or refused with `EvidenceParseError`, never another exception, and in
time linear in its size (a 50 MB log, in many lines or in one, takes seconds): numbers
are ASCII digits of bounded length, every pattern is linear in the line (see below), and
each total is checked against the earlier ones in constant time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpushare_conformance.evidence.errors import EvidenceParseError
from gpushare_conformance.evidence.units import (
    DIGITS,
    NUMBER,
    exact_bounds,
    human_bytes_to_int,
    mib_floor_bounds,
    printed_size_bounds,
    torch_size_to_int,
)

# A size as TensorFlow prints it (`4.21GiB`): digits are taken whole and the unit is
# any letters ending in B, so `4.21iB` or a number of 400 digits is read, then refused
# by `units` (an error), not skipped.
_SIZE = r"[0-9][0-9.]*+\s*+[A-Za-z]{0,3}B"
# Every pattern runs in time linear in the line: whitespace and digit runs are taken
# possessively (`*+`, `++`), fields have bounded lengths, and a free-text field (a name)
# stops at the next occurrence of the pattern's own opening words, so two starts never
# scan the same text. A line of any length, with the opening words repeated, stays linear.
_FOUND = re.compile(rf"Found device (?P<index>{DIGITS}) with properties:(?P<rest>.*)$")
_TF2_PROPS = re.compile(
    r"pciBusID:\s*+(?P<pci>\S{1,64}+)\s++name:\s*+"
    r"(?P<name>(?:(?!pciBusID:|computeCapability:)\S)++(?:\s++(?:(?!pciBusID:|computeCapability:)\S)++)*+)"
    r"\s++computeCapability:\s*+(?P<cc>[0-9]{1,3}\.[0-9]{1,3})"
)
_TF1_NAME = re.compile(
    r"(?:^|(?<=\s))name:\s*+(?P<name>(?:(?!name:|major:)\S)++(?:\s++(?:(?!name:|major:)\S)++)*+)"
    r"\s++major:\s*+(?P<major>[0-9]{1,3})\s++minor:\s*+(?P<minor>[0-9]{1,3})"
)
# the words every continuation fact below contains
_CONTINUATION_WORDS = re.compile(
    r"name:|major:|pciBusID|totalMemory:|Total memory:|deviceMemorySize:|freeMemory:|Free memory:"
)
_TF1_NAME_ALONE = re.compile(r"^name:\s*+(?P<name>.+)$")  # on a stripped line: the name ends with the line
_TF1_MAJOR_MINOR = re.compile(r"^major:\s*+(?P<major>[0-9]{1,3})\s++minor:\s*+(?P<minor>[0-9]{1,3})")
_TF1_PCI = re.compile(r"(?:^|\s)pciBusID:?\s++(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")
_TOTAL = re.compile(rf"(?:totalMemory:|Total memory:)\s*+(?P<size>{_SIZE})")
_FREE = re.compile(rf"(?:freeMemory:|Free memory:)\s*+(?P<size>{_SIZE})")
_DEVICE_MEMORY = re.compile(rf"deviceMemorySize:\s*+(?P<size>{_SIZE})")
_CREATE_OLD = re.compile(
    rf"Creat(?:ed|ing) TensorFlow device \((?P<tfdev>[^\s)]{{1,256}}+)(?: with (?P<mb>{DIGITS}) MB memory)?\)\s*+->\s*+"
    rf"(?:physical GPU )?\(device:\s*+(?P<index>{DIGITS}),\s*+name:\s*+"
    r"(?P<name>(?:(?!,\s*+pci bus id:|Creat(?:ed|ing) TensorFlow device).)*+),\s*+pci bus id:\s*+(?P<pci>[^,)\s]{1,64}+)"
    r"(?:,\s*+compute capability:\s*+(?P<cc>[0-9]{1,3}\.[0-9]{1,3}))?\)"
)
_CREATE_NEW = re.compile(
    rf"Created device (?P<tfdev>\S{{1,256}}+) with (?P<mb>{DIGITS}) MB memory:\s*+->\s*+device:\s*+(?P<index>{DIGITS}),\s*+"
    r"name:\s*+(?P<name>(?:(?!,\s*+pci bus id:|Created device ).)*+),\s*+pci bus id:\s*+(?P<pci>[^,\s]{1,64}+)"
    r"(?:,\s*+compute capability:\s*+(?P<cc>[0-9]{1,3}\.[0-9]{1,3}))?"
)
_CREATE_MARKER = re.compile(r"Creat(?:ed|ing) TensorFlow device|Created device /")
_TORCH_MEMINFO = re.compile(
    rf"mem_get_info\(\s*+(?:device\s*+=\s*+)?['\"]?(?:cuda:)?(?P<index>{DIGITS})['\"]?\s*+\)\s*+[:=]\s*+"
    rf"\(\s*+(?P<free>{DIGITS})\s*+,\s*+(?P<total>{DIGITS})\s*+\)"
)
_TORCH_PROPS = re.compile(
    rf"(?:(?:get_device_properties\(\s*+(?P<index1>{DIGITS})\s*+\)|cuda:(?P<index2>{DIGITS}))\s*+[:=]?\s*+)?"
    r"_CudaDeviceProperties\(name=(?:'(?P<name1>[^'\n]*+)'|\"(?P<name2>[^\"\n]*+)\"),\s*+"
    r"major=(?P<major>[0-9]{1,3}),\s*+minor=(?P<minor>[0-9]{1,3}),"
    rf"(?:(?!total_memory=|_CudaDeviceProperties\().)*+total_memory=(?P<mib>{DIGITS})MB"
)
_TORCH_MARKER = "_CudaDeviceProperties("
_TORCH_SIZE = rf"{NUMBER}\s*+(?:bytes|B|KiB|MiB|GiB)"
_OOM_MARKER = re.compile(r"CUDA out of memory")
_OOM_START = re.compile(r"CUDA out of memory\.\s*+Tried to allocate\b")
# An out-of-memory message is at most a few hundred characters: it is read from a window
# of this many characters of each line it may be wrapped over.
_OOM_WINDOW = 1024
# A line whose marker is followed by more than this many characters, and not by the
# opening words, is not a message cut by a wrap.
_OOM_CUT = 128
_OOM_PRE_21 = re.compile(
    rf"CUDA out of memory\.\s*+Tried to allocate\s++(?P<request>{_TORCH_SIZE})\s*+"
    rf"\(\s*+GPU\s++(?P<index>{DIGITS})\s*+;\s*+(?P<total>{_TORCH_SIZE})\s++total\s++capacity\s*+;"
    rf"(?:\s*+(?P<allocated>{_TORCH_SIZE})\s++already\s++allocated\s*+;\s*+(?P<free>{_TORCH_SIZE})\s++free\b)?"
)
_OOM_21 = re.compile(
    rf"CUDA out of memory\.\s*+Tried to allocate\s++(?P<request>{_TORCH_SIZE})\s*+\.\s*+"
    rf"GPU\s++(?P<index>{DIGITS})\s++has\s++a\s++total\s++capac(?:i)?ty\s++of\s++(?P<total>{_TORCH_SIZE})\s++"
    rf"of\s++which\s++(?P<free>{_TORCH_SIZE})\s++is\s++free\b"
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
# any of the words a device line of the forms above starts from: most lines of a long log
# (training output) hold none, and are passed over with this one search
_ANY_MARKER = re.compile(
    r"Found device |Creat(?:ed|ing) TensorFlow device|Created device /|mem_get_info\(|_CudaDeviceProperties\(|"
    r"CUDA out of memory|CUDA_ERROR_NO_DEVICE|no CUDA-capable device is detected"
)


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
    free_memory_source: str | None = None

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
            "free_memory_source": self.free_memory_source,
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
        # per device, the two earlier totals that bound what all of them allow: the one
        # with the highest `low` and the one with the lowest `high` (see set_total)
        self.tightest: dict[int, tuple[_Total, _Total]] = {}

    def set(self, index: int, **facts: Any) -> None:
        device = self.devices.setdefault(index, TfDevice(index=index))
        for key, value in facts.items():
            if value is not None and getattr(device, key) is None:
                setattr(device, key, value)

    def set_free(self, index: int, value: int, source: str) -> None:
        """Record a free figure; the first one is reported, with the line form it came from."""
        device = self.devices.setdefault(index, TfDevice(index=index))
        if device.free_memory_bytes is None:
            device.free_memory_bytes = value
            device.free_memory_source = source

    def set_total(self, index: int, total: _Total) -> None:
        """Record a total; the first one is reported, every later one must agree with all before it.

        The earlier totals all overlap one another, so (ranges on a line) they share the
        range from their highest `low` to their lowest `high`, and a new range overlaps
        every one of them exactly when it overlaps that shared range: two comparisons
        per line, whatever the number of earlier totals.
        """
        bounds = self.tightest.get(index)
        if bounds is not None:
            highest_low, lowest_high = bounds
            earlier = (
                lowest_high if total.low > lowest_high.high else highest_low if total.high < highest_low.low else None
            )
            if earlier is not None:
                raise EvidenceParseError(
                    f"framework log: GPU {index} total {total.shown} ({_SOURCE_WORDS[total.source]}) disagrees with "
                    f"{earlier.shown} ({_SOURCE_WORDS[earlier.source]}) on line {earlier.line_number}: "
                    f"{earlier.line.strip()[:120]!r}",
                    total.line_number,
                    total.line,
                )
            self.tightest[index] = (
                total if total.low > highest_low.low else highest_low,
                total if total.high < lowest_high.high else lowest_high,
            )
        else:
            self.tightest[index] = (total, total)
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
    try:
        low, high = printed_size_bounds(match.group("size"))
    except ValueError as exc:
        raise EvidenceParseError(f"TensorFlow log: {exc}", number, line) from None
    return _Total(value, low, high, source, match.group("size"), number, line)


@dataclass
class _Oom:
    """What one out-of-memory message says about its GPU."""

    index: int
    total: _Total
    free: int | None


def _oom_messages(lines: list[str], i: int) -> list[_Oom]:
    """Each out-of-memory message starting on line i, glued over wrapped lines."""
    line, number = lines[i], i + 1
    out = []
    for marker in _OOM_MARKER.finditer(line):
        start = marker.start()
        if not _OOM_START.match(line, start) and len(line) - start > _OOM_CUT:
            continue  # the words alone, and no wrap can make them a message
        head = line[start : start + _OOM_WINDOW]
        following = [part[:_OOM_WINDOW] for part in lines[i + 1 : i + 4]]
        # a wrap at a space keeps the words apart; a hard wrap at a column may cut a word
        candidates = [
            " ".join([head.strip(), *(part.strip() for part in following)]),
            head + "".join(following),
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
            free = torch_size_to_int(match.group("free")) if match.group("free") else None
        except ValueError as exc:
            raise EvidenceParseError(f"PyTorch log: {exc}", number, line) from None
        out.append(_Oom(int(match.group("index")), _Total(value, low, high, source, shown, number, line), free))
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
    if not _CONTINUATION_WORDS.search(text):
        return  # program output between the device lines, most of a long log
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
        merger.set_free(index, _size(free, number, line), "tf-free-memory")


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
        if found is None and not _ANY_MARKER.search(line):
            continue
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
            merger.set_free(index, int(meminfo.group("free")), "torch-mem-get-info")
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
            name = props.group("name1") if props.group("name1") is not None else props.group("name2")
            merger.set(index, name=name, compute_capability=f"{props.group('major')}.{props.group('minor')}")
            mib = int(props.group("mib"))
            merger.set_total(
                index, _Total(mib << 20, *mib_floor_bounds(mib), "torch-device-properties", f"{mib}MB", number, line)
            )
            continue
        if _OOM_MARKER.search(line):
            messages = _oom_messages(lines, i - 1)
            for message in messages:
                merger.set_total(message.index, message.total)
                if message.free is not None:
                    merger.set_free(message.index, message.free, message.total.source)
            if messages:
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
