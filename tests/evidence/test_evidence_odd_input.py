"""Odd input that once crashed a parser with something other than EvidenceParseError,
and the free memory PyTorch's out-of-memory messages state."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpushare_conformance.evidence import EvidenceParseError, parse_nvidia_smi, parse_tf_log
from gpushare_conformance.evidence.tf_log import _Merger, _Total

SAMPLES = Path(__file__).parent / "samples"
XML = (SAMPLES / "nvidia-smi" / "xml_v100x2_share.xml").read_text()
TABLE = (SAMPLES / "nvidia-smi" / "seed_470_v100_share.txt").read_text()
TF_SEED = (SAMPLES / "tf-log" / "tf_1.5_found_device_seed.log").read_text()
GIB, MIB = 1 << 30, 1 << 20
TOO_MANY_DIGITS = "9" * 5000  # past int()'s 4300-digit limit


def _refused(parse, text: str, *fragments: str) -> EvidenceParseError:
    with pytest.raises(EvidenceParseError) as info:
        parse(text)
    for fragment in fragments:
        assert fragment in str(info.value)
    return info.value


# ---------------------------------------------------------------- nvidia-smi


def test_csv_value_longer_than_the_csv_modules_field_limit() -> None:
    """A 131,073-character value is past the csv module's limit (it raised _csv.Error)."""
    long = "x" * 131_073
    report = parse_nvidia_smi(f"index, name, memory.total [MiB]\n0, {long}, 4309 MiB\n")
    assert [(g.index, g.name, g.memory_total_mib) for g in report.gpus] == [(0, long, 4309)]
    _refused(parse_nvidia_smi, f"index, memory.total [MiB]\n0, {long}\n", "memory.total must be", "line 2")
    _refused(parse_nvidia_smi, long + "\n", "expected nvidia-smi output")


def test_superscript_digit_in_attached_gpus() -> None:
    """`'2²'.isdigit()` is True but int('2²') raises: only ASCII digits are numbers."""
    text = XML.replace("<attached_gpus>2</attached_gpus>", "<attached_gpus>2\u00b2</attached_gpus>")
    _refused(parse_nvidia_smi, text, "<attached_gpus> must be an integer", "'2²'")


@pytest.mark.parametrize("digit", ["\u00b2", "\u0663", "\uff15", TOO_MANY_DIGITS])
def test_odd_numbers_in_every_nvidia_smi_form(digit: str) -> None:
    """Non-ASCII digits (superscript, Arabic-Indic, full-width) and numbers of 5000 digits."""
    _refused(parse_nvidia_smi, XML.replace("<total>4309 MiB</total>", f"<total>{digit} MiB</total>", 1), "total")
    _refused(parse_nvidia_smi, XML.replace("<attached_gpus>2<", f"<attached_gpus>{digit}<"), "attached_gpus")
    _refused(parse_nvidia_smi, TABLE.replace("569MiB /  4309MiB", f"569MiB /  {digit}MiB"), "GPU 0: expected")
    _refused(parse_nvidia_smi, TABLE.replace("|   1  Tesla", f"|   {digit}  Tesla"), "expected a GPU row")
    _refused(parse_nvidia_smi, f"index, memory.total [MiB]\n{digit}, 4309 MiB\n", "index must be an integer")
    _refused(parse_nvidia_smi, f"index, memory.total [MiB]\n0, {digit} MiB\n", "memory.total must be")
    _refused(parse_nvidia_smi, f"GPU {digit}: Tesla T4 (UUID: GPU-1)\n", "expected nvidia-smi output")
    _refused(
        parse_nvidia_smi,
        f"GPU 0: A100 (UUID: GPU-1)\n  MIG 1g.5gb Device {digit}: (UUID: MIG-1)\n",
        "nvidia-smi -L",
        "line 2",
    )


def test_xml_with_a_lone_surrogate() -> None:
    """Text with no UTF-8 form (it raised UnicodeEncodeError inside ElementTree)."""
    _refused(parse_nvidia_smi, XML.replace("Tesla", "\ud800", 1), "nvidia-smi XML: not well-formed")


def test_many_cards_are_read_in_linear_time() -> None:
    """A card listed twice is found with a set, not by comparing every pair."""
    count = 20_000
    listing = "".join(f"GPU {i}: Tesla T4 (UUID: GPU-{i})\n" for i in range(count))
    assert len(parse_nvidia_smi(listing).gpus) == count
    rows = "".join(f"{i}, GPU-{i}, 15360 MiB\n" for i in range(count))
    assert len(parse_nvidia_smi("index, uuid, memory.total [MiB]\n" + rows).gpus) == count
    _refused(parse_nvidia_smi, listing + "GPU 7: Tesla T4 (UUID: GPU-x)\n", "GPU 7 listed twice")


# ---------------------------------------------------------------- TensorFlow / PyTorch


def test_total_memory_with_an_unknown_unit() -> None:
    """`4.21iB` (a unit that lost its G) raised KeyError: 'IB'."""
    text = TF_SEED.replace("totalMemory: 4.21GiB", "totalMemory: 4.21iB", 1)
    error = _refused(parse_tf_log, text, "unknown size unit 'iB'")
    assert error.line_number == 5
    _refused(parse_tf_log, TF_SEED.replace("freeMemory: 3.91GiB", "freeMemory: 3.91XYZB", 1), "unknown size unit")


@pytest.mark.parametrize("size", ["9" * 400 + ".00GiB", TOO_MANY_DIGITS + "B", "4." + "2" * 400 + "GiB"])
def test_total_memory_with_too_many_digits(size: str) -> None:
    """400 digits overflowed a float (OverflowError); 5000 hit int()'s limit."""
    _refused(parse_tf_log, TF_SEED.replace("totalMemory: 4.21GiB", f"totalMemory: {size}", 1), "not a size like")


@pytest.mark.parametrize("digit", ["\u00b2", "\u0663", TOO_MANY_DIGITS])
def test_odd_numbers_in_device_lines(digit: str) -> None:
    meminfo = f"torch.cuda.mem_get_info(0): ({digit}, 4518313984)\n"
    _refused(parse_tf_log, meminfo, "no GPU device lines")
    props = f"get_device_properties(0): _CudaDeviceProperties(name='T4', major=7, minor=5, total_memory={digit}MB)\n"
    _refused(parse_tf_log, props, "_CudaDeviceProperties(name=", "line 1")
    oom = f"CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of {digit} GiB of which 0 bytes is free.\n"
    _refused(parse_tf_log, oom, "reads as neither", "line 1")
    created = f"Created device /job:localhost/replica:0/task:0/device:GPU:0 with {digit} MB memory:  -> device: 0, name: T4, pci bus id: 0000:00:04.0\n"
    _refused(parse_tf_log, created, "device-creation line")


PRE_21 = (
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 4.00 GiB total capacity; "
    "3.50 GiB already allocated; {free} free; 3.60 GiB reserved in total by PyTorch)\n"
)
FROM_21 = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 4.00 GiB "
    "of which {free} is free. Including non-PyTorch memory, this process has 3.99 GiB memory in use.\n"
)


@pytest.mark.parametrize(
    "template, source", [(PRE_21, "torch-oom-pre-2.1"), (FROM_21, "torch-oom-2.1+")], ids=["pre-2.1", "2.1+"]
)
@pytest.mark.parametrize("free, expected", [("0 bytes", 0), ("512 bytes", 512), ("245.81 MiB", round(245.81 * MIB))])
def test_oom_message_free_memory(template: str, source: str, free: str, expected: int) -> None:
    device = parse_tf_log(template.format(free=free)).devices[0]
    assert (device.total_memory_bytes, device.total_memory_source) == (4 * GIB, source)
    assert (device.free_memory_bytes, device.free_memory_source) == (expected, source)
    assert device.to_dict()["free_memory_source"] == source


@pytest.mark.parametrize("template", [PRE_21, FROM_21], ids=["pre-2.1", "2.1+"])
def test_oom_free_memory_wrapped_and_the_first_figure_wins(template: str) -> None:
    message = template.format(free="1.25 GiB")
    wrapped = "\n".join(message[i : i + 80] for i in range(0, len(message), 80))
    later = template.format(free="0 bytes")
    device = parse_tf_log(wrapped + "\nAccuracy at step 10: 0.7226\n" + later).devices[0]
    assert device.free_memory_bytes == round(1.25 * GIB)
    # a probe's figure from before the failure comes first and wins, like the total
    meminfo = "torch.cuda.mem_get_info(0): (4000000000, 4294967296)\n"
    device = parse_tf_log(meminfo + message).devices[0]
    assert (device.free_memory_bytes, device.free_memory_source) == (4_000_000_000, "torch-mem-get-info")
    assert (device.total_memory_bytes, device.total_memory_source) == (4 * GIB, "torch-mem-get-info")


def test_pre_21_message_cut_before_its_free_figure_still_gives_the_total() -> None:
    cut = "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 4.00 GiB total capacity; 3.50 GiB\n"
    device = parse_tf_log(cut).devices[0]
    assert (device.total_memory_bytes, device.free_memory_bytes, device.free_memory_source) == (4 * GIB, None, None)


def test_tf_free_memory_carries_its_source() -> None:
    device = parse_tf_log(TF_SEED).devices[0]
    assert (device.free_memory_bytes, device.free_memory_source) == (round(3.91 * GIB), "tf-free-memory")


ranges = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20)).map(lambda t: (t[0], t[0] + t[1])), max_size=12)


@settings(max_examples=300, deadline=None)
@given(ranges)
def test_totals_are_checked_against_all_earlier_ones(pairs: list[tuple[int, int]]) -> None:
    """Two comparisons per total (against the shared range of the earlier ones) say what
    comparing it with every earlier total says: the same line is refused."""
    expected_refusal = next(
        (n for n, (low, high) in enumerate(pairs) if any(low > h or high < lo for lo, h in pairs[:n])), None
    )
    merger = _Merger()
    refused = None
    for n, (low, high) in enumerate(pairs):
        try:
            merger.set_total(0, _Total(low, low, high, "torch-mem-get-info", f"total#{n}", n + 1, f"line {n + 1}"))
        except EvidenceParseError as exc:
            refused = n
            earlier = int(str(exc).split(" disagrees with total#")[1].split(" ")[0])
            lo, hi = pairs[earlier]
            assert earlier < n and (low > hi or high < lo)  # names an earlier total it really disagrees with
            break
    assert refused == expected_refusal
