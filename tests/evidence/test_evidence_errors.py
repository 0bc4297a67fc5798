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


@pytest.mark.parametrize("text", ["", "   \n\n", "hello world\n", "Accuracy at step 10: 0.72\n", "Hello, world\nfoo, bar\n"])
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
    text = (SAMPLES / "nvidia-smi" / "table_470_a100_mig_enabled.txt").read_text().replace("|  0    5   0   1  |", "|  3    5   0   1  |")
    _raises(parse_nvidia_smi, text, "MIG device on GPU 3")


def test_csv_errors() -> None:
    _raises(parse_nvidia_smi, "index, name, memory.total [MiB]\n0, Tesla T4, 15360 MiB, extra\n", "expected 3 values", line_number=2)
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
    _raises(parse_nvidia_smi, good.replace("<total>4309 MiB</total>", "<total>4309 MiB</totl>", 1), "not well-formed", line_number=27)
    _raises(parse_nvidia_smi, good.replace("<attached_gpus>2</attached_gpus>", "<attached_gpus>3</attached_gpus>"), "attached_gpus")
    _raises(parse_nvidia_smi, good.replace("<total>4309 MiB</total>", "<total>lots</total>", 1), "fb_memory_usage/total")


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
