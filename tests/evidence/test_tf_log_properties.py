"""Random devices written as each TensorFlow / PyTorch version logs them parse back."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpushare_conformance.evidence import parse_tf_log

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

device_names = st.sampled_from(["Tesla V100-SXM2-16GB", "Tesla T4", "NVIDIA A100-SXM4-40GB", "NVIDIA GeForce RTX 3090", "NVIDIA H200"])
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
            creations.append(f"{STAMP}Creating TensorFlow device (/device:GPU:{index}) -> (device: {index}, name: {name}, pci bus id: {pci}, compute capability: 7.0)")
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
        {"index": d.index, "name": d.name, "total": d.total_memory_bytes, "free": d.free_memory_bytes, "limit": d.limit_mib}
        for d in report.devices
    ]
    assert got == expected
