"""Random devices written as each TensorFlow / PyTorch version logs them parse back,
PyTorch out-of-memory messages included."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpushare_conformance.evidence import EvidenceParseError, parse_tf_log

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GIB = 1 << 30
STAMP = "2023-06-14 03:24:02.705116: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1105] "
NOISE = [
    "I0000 00:00:1712025345.870067  431105 service.cc:145] XLA service 0x7f3a2c005d30 initialized for platform CUDA",
    "I0000 00:00:1712025345.870102  431105 service.cc:153]   StreamExecutor device (0): NVIDIA GeForce RTX 3090, Compute Capability 8.6",
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "Accuracy at step 10: 0.7226",
    "2023-06-14 03:24:02.862789: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1120] Device peer to peer matrix",
]

device_names = st.sampled_from(
    ["Tesla V100-SXM2-16GB", "Tesla T4", "NVIDIA A100-SXM4-40GB", "NVIDIA GeForce RTX 3090", "NVIDIA H200"]
)
hundredths = st.integers(1, 20000)  # GiB * 100


@st.composite
def logs(draw):
    family = draw(st.sampled_from(["1.5", "1.12", "2.3", "2.11", "torch"]))
    count = draw(st.integers(1, 8))
    messages, expected = [], []
    creations = []
    for index in range(count):
        name = draw(device_names)
        pci = f"0000:00:{index + 4:02x}.0"
        total_h = draw(hundredths)
        free_h = draw(st.integers(0, total_h))
        limit = draw(st.integers(1, 200000))
        total = f"{Decimal(total_h) / 100:.2f}GiB"
        free = f"{Decimal(free_h) / 100:.2f}GiB"
        want = {"index": index, "name": name, "total": None, "free": None, "limit": None}
        if family in ("1.5", "1.12"):
            messages.append(
                f"{STAMP}Found device {index} with properties: \n"
                f"name: {name} major: 7 minor: 0 memoryClockRate(GHz): 1.53\npciBusID: {pci}\n"
                f"totalMemory: {total} freeMemory: {free}"
            )
            want["total"], want["free"] = round(Decimal(total_h) / 100 * GIB), round(Decimal(free_h) / 100 * GIB)
        if family == "2.3":
            messages.append(
                f"{STAMP}Found device {index} with properties: \n"
                f"pciBusID: {pci} name: {name} computeCapability: 7.0\n"
                f"coreClock: 1.53GHz coreCount: 80 deviceMemorySize: {total} deviceMemoryBandwidth: 836.37GiB/s"
            )
            want["total"] = round(Decimal(total_h) / 100 * GIB)
        if family == "1.5":
            creations.append(
                f"{STAMP}Creating TensorFlow device (/device:GPU:{index}) -> (device: {index}, name: {name}, pci bus id: {pci}, compute capability: 7.0)"
            )
        if family in ("1.12", "2.3"):
            creations.append(
                f"{STAMP}Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:{index} with {limit} MB memory) "
                f"-> physical GPU (device: {index}, name: {name}, pci bus id: {pci}, compute capability: 7.0)"
            )
            want["limit"] = limit
        if family == "2.11":
            creations.append(
                f"{STAMP}Created device /job:localhost/replica:0/task:0/device:GPU:{index} with {limit} MB memory:  "
                f"-> device: {index}, name: {name}, pci bus id: {pci}, compute capability: 7.0"
            )
            want["limit"] = limit
        if family == "torch":
            total_b = draw(st.integers(1 << 20, 200 * GIB))
            free_b = draw(st.integers(0, total_b))
            messages.append(f"torch.cuda.mem_get_info({index}): ({free_b}, {total_b})")
            messages.append(
                f"get_device_properties({index}): _CudaDeviceProperties(name='{name}', major=7, minor=0, "
                f"total_memory={total_b >> 20}MB, multi_processor_count=80)"
            )
            want["total"], want["free"] = total_b, free_b  # mem_get_info comes first and wins
        expected.append(want)
    messages += creations
    text = []
    for message in messages:
        text.append(message)
        text += draw(st.lists(st.sampled_from(NOISE), max_size=2))
    return "\n".join(text) + "\n", expected


@SETTINGS
@given(logs())
def test_tf_log_round_trip(case):
    text, expected = case
    report = parse_tf_log(text)
    got = [
        {
            "index": d.index,
            "name": d.name,
            "total": d.total_memory_bytes,
            "free": d.free_memory_bytes,
            "limit": d.limit_mib,
        }
        for d in report.devices
    ]
    assert got == expected


# PyTorch's caching allocator: format_size prints up to 1024 bytes as "<n> bytes", then
# two decimals in KiB (to 1 MiB), MiB (to 1 GiB), GiB above.
_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def format_size(size: int, bytes_word: str = "bytes") -> str:
    if size <= 1024:
        return f"{size} {bytes_word}"
    if size <= 1 << 20:
        return f"{size / 1024:.2f} KiB"
    if size <= 1 << 30:
        return f"{size / (1 << 20):.2f} MiB"
    return f"{size / (1 << 30):.2f} GiB"


def printed_bytes(shown: str) -> int:
    number, unit = shown.split()
    scale = {"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[unit]
    return round(Decimal(number) * scale)


def human_readable_num_bytes(size: int) -> str:
    """TensorFlow's HumanReadableNumBytes: `<n>B` below 1 KiB, else two decimals, no space."""
    if size < 1024:
        return f"{size}B"
    value, unit = float(size), -1
    while value >= 1024 and unit < 3:
        value /= 1024
        unit += 1
    return f"{value:.2f}{'KMGT'[unit]}iB"


def oom_message(era: str, index: int, total: str, request: str, free: str, allocated: str) -> str:
    if era == "1.x-cached":
        return f"RuntimeError: CUDA out of memory. Tried to allocate {request} (GPU {index}; {total} total capacity; {allocated} already allocated; {free} free; {allocated} cached)"
    if era == "pre-2.1":
        return (
            f"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate {request} (GPU {index}; {total} total capacity; "
            f"{allocated} already allocated; {free} free; {allocated} reserved in total by PyTorch) If reserved memory is >> allocated "
            "memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF"
        )
    if era == "pre-2.1-fraction":
        return (
            f"RuntimeError: CUDA out of memory. Tried to allocate {request} (GPU {index}; {total} total capacity; {allocated} already allocated; "
            f"{free} free; {allocated} allowed; {allocated} reserved in total by PyTorch)"
        )
    capacity = "capacty" if era == "2.1" else "capacity"
    return (
        f"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate {request}. GPU {index} has a total {capacity} of {total} "
        f"of which {free} is free. Process 4242 has {allocated} memory in use. Of the allocated memory {allocated} is allocated by PyTorch, "
        "and 20.00 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting max_split_size_mb "
        "to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF"
    )


ERAS = ["1.x-cached", "pre-2.1", "pre-2.1-fraction", "2.1", "2.2+"]
# totals across every unit format_size picks, with the boundaries themselves
totals = st.one_of(
    st.integers(0, 1024),
    st.integers(1025, 1 << 20),
    st.integers((1 << 20) + 1, 1 << 30),
    st.integers((1 << 30) + 1, 1 << 42),
    st.sampled_from([1024, 1025, 1 << 20, (1 << 20) + 1, 1 << 30, (1 << 30) + 1, 4518313984, 85899345920]),
)


def _wrap(text: str, width: int) -> list[str]:
    return [text[i : i + width] for i in range(0, len(text), width)]


@st.composite
def oom_logs(draw):
    count = draw(st.integers(1, 6))
    lines, expected = [], []
    for index in draw(st.permutations(range(count))):
        total = draw(totals)
        bytes_word = draw(st.sampled_from(["bytes", "B"]))
        shown = format_size(total, bytes_word)
        # another form first (exact, whole MiB cut down, TF's two decimals), then OOMs that must agree with it
        first = draw(st.sampled_from([None, "meminfo", "props", "tf"]))
        if first == "meminfo":
            lines.append(f"torch.cuda.mem_get_info({index}): ({draw(st.integers(0, total))}, {total})")
        if first == "props":
            lines.append(
                f"get_device_properties({index}): _CudaDeviceProperties(name='NVIDIA H200', major=9, minor=0, "
                f"total_memory={total >> 20}MB, multi_processor_count=132)"
            )
        if first == "tf":
            tf_total = human_readable_num_bytes(total)
            lines += [
                f"{STAMP}Found device {index} with properties: ",
                "name: NVIDIA H200 major: 9 minor: 0 memoryClockRate(GHz): 1.98",
                f"pciBusID: 0000:00:{index + 4:02x}.0",
                f"totalMemory: {tf_total} freeMemory: {human_readable_num_bytes(total // 2)}",
            ]
        for _ in range(draw(st.integers(1, 3))):
            era = draw(st.sampled_from(ERAS))
            message = oom_message(
                era,
                index,
                shown,
                format_size(draw(st.integers(1, 1 << 40))),
                format_size(draw(st.integers(0, total)), bytes_word),
                format_size(draw(st.integers(0, total))),
            )
            width = draw(st.sampled_from([None, 80, 120, 200]))
            lines += [message] if width is None else _wrap(message, width)
            lines += draw(st.lists(st.sampled_from(NOISE), max_size=2))
        if first == "meminfo":
            expected.append((index, total, "torch-mem-get-info"))
        elif first == "props":
            expected.append((index, (total >> 20) << 20, "torch-device-properties"))
        elif first == "tf":
            expected.append(
                (
                    index,
                    printed_bytes(tf_total[:-3] + " " + tf_total[-3:]) if total >= 1024 else total,
                    "tf-total-memory",
                )
            )
        else:
            expected.append((index, printed_bytes(shown), None))
    return "\n".join(lines) + "\n", sorted(expected)


@SETTINGS
@given(oom_logs())
def test_torch_oom_round_trip(case):
    text, expected = case
    report = parse_tf_log(text)
    got = [(d.index, d.total_memory_bytes, d.total_memory_source) for d in report.devices]
    assert [(i, t) for i, t, _ in got] == [(i, t) for i, t, _ in expected]
    for (_, _, source), (_, _, want) in zip(got, expected, strict=True):
        assert source == want or (want is None and source in ("torch-oom-pre-2.1", "torch-oom-2.1+"))


@SETTINGS
# Two decimals of a unit the figure is at least 1 of: at most 0.5% off. Totals more than
# 1.1% apart can therefore not be one card printed twice ("1019 bytes" and "1.00 KiB" can).
@given(
    st.tuples(totals, totals).filter(lambda pair: abs(pair[0] - pair[1]) > max(pair) * 0.011 + 1),
    st.sampled_from(ERAS),
    st.sampled_from(ERAS),
)
def test_torch_oom_totals_that_differ_are_an_error(pair, era_a, era_b):
    first, second = (
        oom_message(era, 0, format_size(total), "2.00 MiB", "0 bytes", "1.00 MiB")
        for era, total in zip((era_a, era_b), pair, strict=True)
    )
    with pytest.raises(EvidenceParseError, match="GPU 0 total .* disagrees with"):
        parse_tf_log(f"{first}\nAccuracy at step 10: 0.7226\n{second}\n")
