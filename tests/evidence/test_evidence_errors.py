"""Malformed input is an error that says what was expected and where it stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushare_conformance.evidence import EvidenceParseError, parse_nvidia_smi, parse_tf_log

SAMPLES = Path(__file__).parent / "samples"
SEED_TABLE = (SAMPLES / "nvidia-smi" / "seed_470_v100_share.txt").read_text()


def _raises(func, text: str, *fragments: str, line_number: int | None = None) -> EvidenceParseError:
    with pytest.raises(EvidenceParseError) as info:
        func(text)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message
    if line_number is not None:
        assert info.value.line_number == line_number
        assert f"line {line_number}" in message
    return info.value


@pytest.mark.parametrize(
    "text", ["", "   \n\n", "hello world\n", "Accuracy at step 10: 0.72\n", "Hello, world\nfoo, bar\n"]
)
def test_not_nvidia_smi_output(text: str) -> None:
    _raises(parse_nvidia_smi, text, "expected nvidia-smi output")


def test_driver_failure_message_is_reported_as_such() -> None:
    text = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n"
    _raises(parse_nvidia_smi, text, "nvidia-smi reported an error", line_number=1)
    _raises(parse_nvidia_smi, "Failed to initialize NVML: Driver/library version mismatch\n", "reported an error")


def test_no_devices_message_is_zero_gpus_but_only_that_exact_message() -> None:
    assert parse_nvidia_smi("No devices were found\n").gpus == []
    _raises(parse_nvidia_smi, "No devices found\n", "expected nvidia-smi output")


def test_header_without_gpu_rows() -> None:
    head = "\n".join(SEED_TABLE.splitlines()[:8]) + "\n"
    _raises(parse_nvidia_smi, head, "header but no GPU rows")


def test_table_cut_inside_a_card() -> None:
    lines = SEED_TABLE.splitlines()
    cut = "\n".join(lines[:9]) + "\n"  # GPU 0's first row only
    _raises(parse_nvidia_smi, cut, "GPU 0", "memory")


def test_garbled_memory_cell_names_the_line() -> None:
    text = SEED_TABLE.replace("569MiB /  4309MiB", "569MiB /  4309GB ")
    _raises(parse_nvidia_smi, text, "GPU 0: expected a memory cell", line_number=10)


def test_unknown_row_in_gpu_table_names_the_line() -> None:
    text = SEED_TABLE.replace("|   1  Tesla V100-SXM2...  On   |", "|   x  Tesla V100-SXM2...  On   |")
    _raises(parse_nvidia_smi, text, "expected a GPU row", line_number=13)


def test_two_captures_in_one_input() -> None:
    _raises(parse_nvidia_smi, SEED_TABLE + SEED_TABLE, "second nvidia-smi header")


def test_mig_device_on_an_unlisted_card() -> None:
    text = (
        (SAMPLES / "nvidia-smi" / "table_470_a100_mig_enabled.txt")
        .read_text()
        .replace("|  0    5   0   1  |", "|  3    5   0   1  |")
    )
    _raises(parse_nvidia_smi, text, "MIG device on GPU 3")


def test_csv_errors() -> None:
    _raises(
        parse_nvidia_smi,
        "index, name, memory.total [MiB]\n0, Tesla T4, 15360 MiB, extra\n",
        "expected 3 values",
        line_number=2,
    )
    _raises(parse_nvidia_smi, "index, memory.total [MiB]\n0, lots\n", "memory.total must be", line_number=2)
    _raises(parse_nvidia_smi, "index, memory.total [MiB]\n", "header but no GPU rows")
    _raises(parse_nvidia_smi, "0, Tesla T4, 15360\n1, Tesla T4, 15360\n", "without a header", "--fields", line_number=1)
    with pytest.raises(EvidenceParseError, match="differ from the given fields"):
        parse_nvidia_smi("index, name\n0, T4\n", csv_fields=["name", "index"])


def test_list_errors() -> None:
    _raises(parse_nvidia_smi, "GPU 0: Tesla T4 (UUID: GPU-1)\nsomething else\n", "nvidia-smi -L", line_number=2)
    _raises(parse_nvidia_smi, "GPU 0: Tesla T4 (UUID: GPU-1)\nGPU 0: Tesla T4 (UUID: GPU-2)\n", "listed twice")


def test_xml_errors() -> None:
    good = (SAMPLES / "nvidia-smi" / "xml_v100x2_share.xml").read_text()
    _raises(parse_nvidia_smi, good.split("</nvidia_smi_log>")[0], "no closing")
    _raises(
        parse_nvidia_smi,
        good.replace("<total>4309 MiB</total>", "<total>4309 MiB</totl>", 1),
        "not well-formed",
        line_number=27,
    )
    _raises(
        parse_nvidia_smi,
        good.replace("<attached_gpus>2</attached_gpus>", "<attached_gpus>3</attached_gpus>"),
        "attached_gpus",
    )
    _raises(
        parse_nvidia_smi, good.replace("<total>4309 MiB</total>", "<total>lots</total>", 1), "fb_memory_usage/total"
    )


def test_tf_log_without_devices() -> None:
    _raises(parse_tf_log, "Accuracy at step 10: 0.72\n", "no GPU device lines", "Found device")
    _raises(parse_tf_log, "", "no GPU device lines")


def test_tf_log_reporting_no_cuda_device() -> None:
    text = "2023-06-14 03:24:02.301553: E tensorflow/stream_executor/cuda/cuda_driver.cc:300] failed call to cuInit: CUDA_ERROR_NO_DEVICE\n"
    _raises(parse_tf_log, text, "CUDA found no device", line_number=1)


def test_tf_log_truncated_creation_line() -> None:
    text = "2019-03-11 09:14:27.693417: I gpu_device.cc:1115] Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 14116 MB\n"
    _raises(parse_tf_log, text, "device-creation line", line_number=1)


def test_torch_errors() -> None:
    _raises(parse_tf_log, "_CudaDeviceProperties(name='T4', major=7)\n", "_CudaDeviceProperties(name=", line_number=1)
    mixed = (
        "get_device_properties(0): _CudaDeviceProperties(name='T4', major=7, minor=5, total_memory=15109MB, multi_processor_count=40)\n"
        "_CudaDeviceProperties(name='T4', major=7, minor=5, total_memory=15109MB, multi_processor_count=40)\n"
    )
    _raises(parse_tf_log, mixed, "with and without an index", line_number=2)


OOM_21 = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {i} has a total capacity of {total} of which 0 bytes is free. Process 1234 has 5.99 GiB memory in use.\n"
OOM_OLD = "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU {i}; {total} total capacity; 1000.00 MiB already allocated; 0 bytes free; 1010.00 MiB reserved in total by PyTorch)\n"


def test_oom_messages_for_one_gpu_must_agree() -> None:
    text = (
        OOM_21.format(i=0, total="6.00 GiB")
        + OOM_OLD.format(i=1, total="6.00 GiB")
        + OOM_21.format(i=0, total="5.99 GiB")
    )
    error = _raises(parse_tf_log, text, "GPU 0 total 5.99 GiB", "disagrees with 6.00 GiB", "on line 1", line_number=3)
    assert "out-of-memory" in str(error)
    # the same total printed again, or on another GPU, is fine
    same = OOM_21.format(i=0, total="6.00 GiB") * 2 + OOM_OLD.format(i=1, total="1024.00 MiB")
    assert [(d.index, d.total_memory_bytes) for d in parse_tf_log(same).devices] == [(0, 6 << 30), (1, 1 << 30)]


def test_oom_total_must_agree_with_earlier_forms() -> None:
    meminfo = "torch.cuda.mem_get_info(0): (100, 4518313984)\n"
    _raises(
        parse_tf_log,
        meminfo + OOM_21.format(i=0, total="4.22 GiB"),
        "disagrees with 4518313984 bytes",
        "mem_get_info",
        line_number=2,
    )
    assert parse_tf_log(meminfo + OOM_21.format(i=0, total="4.21 GiB")).devices[0].total_memory_bytes == 4518313984
    found = (
        "2019-03-11 09:14:27.301: I gpu_device.cc:1433] Found device 0 with properties: \n"
        "name: Tesla V100-SXM2-16GB major: 7 minor: 0 memoryClockRate(GHz): 1.53\npciBusID: 0000:00:07.0\n"
        "totalMemory: 4.21GiB freeMemory: 3.91GiB\n"
    )
    _raises(
        parse_tf_log,
        found + OOM_OLD.format(i=0, total="15.75 GiB"),
        "disagrees with 4.21GiB",
        "totalMemory",
        line_number=5,
    )
    props = "get_device_properties(0): _CudaDeviceProperties(name='T4', major=7, minor=5, total_memory=4309MB, multi_processor_count=40)\n"
    _raises(
        parse_tf_log, props + "torch.cuda.mem_get_info(0): (1, 4519362560)\n", "disagrees with 4309MB", line_number=2
    )
    assert (
        parse_tf_log(props + "torch.cuda.mem_get_info(0): (1, 4519362559)\n").devices[0].total_memory_source
        == "torch-device-properties"
    )


def test_oom_message_that_reads_as_neither_form() -> None:
    cut = "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 1024.00 MB total capacity; 1000.00 MiB already\n"
    _raises(
        parse_tf_log,
        "step 1\n" + cut,
        "reads as neither",
        "(GPU <i>; <size> total capacity;",
        "has a total capacity of",
        line_number=2,
    )
    _raises(parse_tf_log, OOM_21.format(i="x", total="6.00 GiB"), "reads as neither", line_number=1)


def test_the_words_cuda_out_of_memory_alone_are_no_device_line() -> None:
    text = "    if 'CUDA out of memory' in str(exc):\ntorch.cuda.OutOfMemoryError: CUDA out of memory.\n"
    _raises(parse_tf_log, text, "no GPU device lines", "CUDA out of memory. Tried to allocate")


def test_wide_csv_errors_name_the_column_and_line() -> None:
    fields = ["timestamp", *(f"clocks_event_reasons.reason{n}" for n in range(150)), "memory.total [MiB]", "index"]
    header = ", ".join(fields)
    row = ", ".join(["2026/12/03 09:41:12.345", *(["Not Active"] * 150), "40960 MiB", "0"])
    error = _raises(
        parse_nvidia_smi,
        f"{header}\n{row}, extra\n",
        "expected 153 values",
        "(timestamp, ",
        "more), index), got 154",
        line_number=2,
    )
    assert len(str(error)) < 400
    _raises(parse_nvidia_smi, f"{header}\n{row.replace('40960 MiB', '40 GB')}\n", "memory.total must be", line_number=2)
    _raises(
        parse_nvidia_smi,
        "index, name, memory.total [MiB], power draw\n0, T4, 15360 MiB, 70 W\n",
        "column 4 ('power draw') is not a field name",
        line_number=1,
    )
    _raises(
        parse_nvidia_smi,
        "index, name, gpu_name, memory.total\n0, T4, A10, 15360\n",
        "columns 'name' and 'gpu_name'",
        line_number=2,
    )
    assert parse_nvidia_smi("index, name, gpu_name, memory.total\n0, T4, T4, 15360\n").gpus[0].name == "T4"
    with pytest.raises(EvidenceParseError, match="not a --query-gpu field name"):
        parse_nvidia_smi("0, T4\n", csv_fields=["index", "power draw"])


def test_csv_of_several_loop_samples_is_not_more_cards() -> None:
    sample = "2026/12/03 09:41:12.345, GPU-aaaa, 4309 MiB\n2026/12/03 09:41:12.351, GPU-bbbb, 4309 MiB\n"
    text = "timestamp, uuid, memory.total [MiB]\n" + sample + sample.replace(":12.", ":13.")
    _raises(parse_nvidia_smi, text, "GPU UUID GPU-aaaa listed twice", "--loop", line_number=4)
    with_index = "timestamp, index, memory.total [MiB]\n2026/12/03 09:41:12.345, 0, 4309 MiB\n2026/12/03 09:41:13.345, 0, 4309 MiB\n"
    _raises(parse_nvidia_smi, with_index, "GPU index 0 listed twice", line_number=3)
