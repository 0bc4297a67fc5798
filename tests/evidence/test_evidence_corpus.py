"""Every sample of the corpus parses to its expected JSON, and to the facts written
down by hand for it (so a wrong expected file cannot hide a wrong parser)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpushare_conformance.evidence import parse_nvidia_smi, parse_tf_log

SAMPLES = Path(__file__).parent / "samples"
# the project keeps the seed beside the repository, in ../shared/seed/
SEED = Path(__file__).resolve().parents[2].parent / "shared" / "seed" / "000_7bdc776826bb7f12.txt"


def _samples(kind: str) -> list[Path]:
    return sorted(p for p in (SAMPLES / kind).iterdir() if not p.name.endswith((".expected.json", ".fields")))


def _smi(path: Path):
    fields_file = path.with_name(path.name + ".fields")
    fields = fields_file.read_text().strip().split(",") if fields_file.exists() else None
    return parse_nvidia_smi(path.read_text(), csv_fields=fields)


@pytest.mark.parametrize("path", _samples("nvidia-smi"), ids=lambda p: p.name)
def test_nvidia_smi_sample_matches_expected_json(path: Path) -> None:
    expected = json.loads(path.with_name(path.name + ".expected.json").read_text())
    assert _smi(path).to_dict() == expected


@pytest.mark.parametrize("path", _samples("tf-log"), ids=lambda p: p.name)
def test_tf_log_sample_matches_expected_json(path: Path) -> None:
    expected = json.loads(path.with_name(path.name + ".expected.json").read_text())
    assert parse_tf_log(path.read_text()).to_dict() == expected


# sample -> (driver, cuda, [(index, name, used, total)]) read off the files by eye
SMI_FACTS = {
    "seed_470_v100_share.txt": (
        "470.161.03",
        "11.4",
        [(0, "Tesla V100-SXM2...", 569, 4309), (1, "Tesla V100-SXM2...", 381, 4309)],
    ),
    "table_470_web_collapsed.txt": (
        "470.161.03",
        "11.4",
        [(0, "Tesla V100-SXM2...", 569, 4309), (1, "Tesla V100-SXM2...", 381, 4309)],
    ),
    "table_396_k80_no_cuda_version.txt": ("396.44", None, [(0, "Tesla K80", 0, 11441)]),
    "table_418_t4.txt": ("418.87.01", "10.1", [(0, "Tesla T4", 0, 15079)]),
    "table_440_v100x4_processes.txt": (
        "440.118.02",
        "10.2",
        [(i, "Tesla V100-SXM2...", u, 16160) for i, u in enumerate([15727, 15727, 11, 11])],
    ),
    "table_450_a100_mig_disabled.txt": (
        "450.80.02",
        "11.0",
        [(0, "A100-SXM4-40GB", 4, 40537), (1, "A100-SXM4-40GB", 2913, 40537)],
    ),
    "table_470_a100_mig_enabled.txt": ("470.57.02", "11.4", [(0, "NVIDIA A100-SXM...", 13, 40536)]),
    "table_510_a10_pod_share.txt": ("510.47.03", "11.6", [(0, "NVIDIA A10", 0, 6144)]),
    "table_530_rtx3090_glued.txt": ("530.30.02", "12.1", [(0, "NVIDIA GeForce RTX 3090", 540, 24576)]),
    "table_535_t4x2.txt": ("535.104.05", "12.2", [(0, "Tesla T4", 2, 15360), (1, "Tesla T4", 2, 15360)]),
    "table_535_laptop_truncated_name.txt": ("535.54.03", "12.2", [(0, "NVIDIA GeForce RTX 3060 ...", 412, 6144)]),
    "table_535_h100_mig.txt": ("535.129.03", "12.2", [(0, "NVIDIA H100 80GB HBM3", 25, 81559)]),
    "table_540_orin_not_supported.txt": (None, "12.2", [(0, "Orin (nvgpu)", None, None)]),
    "table_550_a100.txt": ("550.54.15", "12.4", [(0, "NVIDIA A100-SXM4-40GB", 1, 40960)]),
    "table_550_wrapped_80.txt": ("550.54.15", "12.4", [(0, "NVIDIA A100-SXM4-40GB", 1, 40960)]),
    "table_575_l4x2_share.txt": ("575.57.08", "12.9", [(0, "NVIDIA L4", 3012, 8192), (1, "NVIDIA L4", 3010, 8192)]),
    "table_580_h200_mig_na.txt": ("580.65.06", "13.0", [(0, "NVIDIA H200", None, None), (1, "NVIDIA H200", 0, 143771)]),
    "table_610_kmd_version.txt": (
        "610.19",
        "13.2",
        [(0, "NVIDIA RTX PRO 6000 Blac...", 4096, 24576), (1, "NVIDIA RTX PRO 6000 Blac...", 0, 24576)],
    ),
    "csv_header_units.txt": (
        None,
        None,
        [(0, "Tesla V100-SXM2-16GB", 569, 4309), (1, "Tesla V100-SXM2-16GB", 381, 4309)],
    ),
    "csv_header_nounits.txt": (
        "535.104.05",
        None,
        [(0, "NVIDIA A100-SXM4-40GB", 4, 40960), (1, "NVIDIA A100-SXM4-40GB", 2913, 40960)],
    ),
    "csv_noheader_canonical.txt": (None, None, [(0, "Tesla T4", 2, 15360), (1, "Tesla T4", 2, 15360)]),
    "csv_noheader_nounits_fields.txt": (None, None, [(0, "NVIDIA L4", 3012, 8192), (1, "NVIDIA L4", 3010, 8192)]),
    "csv_placeholders_mig.txt": (None, None, [(0, "NVIDIA H200", None, None), (1, "NVIDIA H200", 0, 143771)]),
    "csv_wide_150_h100_share.txt": (
        "580.65.06",
        None,
        [(0, "NVIDIA H100 80GB HBM3", 4, 40960), (1, "NVIDIA H100 80GB HBM3", 32771, 40960)],
    ),
    "csv_noheader_wide_181.txt": (
        "580.65.06",
        None,
        [(0, "NVIDIA H100 80GB HBM3", 4, 40960), (1, "NVIDIA H100 80GB HBM3", None, 40960)],
    ),
    "csv_camelcase_no_index.txt": (
        None,
        None,
        [(0, "Tesla T4", 3012, 7680), (1, "Tesla T4", 5, 7680), (2, "Tesla T4", None, 7680)],
    ),
    "list_t4x2.txt": (None, None, [(0, "Tesla T4", None, None), (1, "Tesla T4", None, None)]),
    "list_a100_mig.txt": (
        None,
        None,
        [(0, "NVIDIA A100-SXM4-40GB", None, None), (1, "NVIDIA A100-SXM4-40GB", None, None)],
    ),
    "list_mig_old_uuid.txt": (None, None, [(0, "A100-SXM4-40GB", None, None)]),
    "xml_v100x2_share.xml": (
        "470.161.03",
        "11.4",
        [(0, "Tesla V100-SXM2-16GB", 569, 4309), (1, "Tesla V100-SXM2-16GB", 381, 4309)],
    ),
    "xml_a100_mig.xml": ("535.104.05", "12.2", [(0, "NVIDIA A100-SXM4-40GB", 12, 40960)]),
    "no_devices.txt": (None, None, []),
}


def test_every_sample_has_hand_written_facts() -> None:
    assert {p.name for p in _samples("nvidia-smi")} == set(SMI_FACTS)


@pytest.mark.parametrize("name", sorted(SMI_FACTS))
def test_nvidia_smi_sample_facts(name: str) -> None:
    driver, cuda, cards = SMI_FACTS[name]
    report = _smi(SAMPLES / "nvidia-smi" / name)
    assert (report.driver_version, report.cuda_version) == (driver, cuda)
    assert [(g.index, g.name, g.memory_used_mib, g.memory_total_mib) for g in report.gpus] == cards


def test_mig_devices_are_attached_to_their_card() -> None:
    report = _smi(SAMPLES / "nvidia-smi" / "table_470_a100_mig_enabled.txt")
    migs = report.gpus[0].mig_devices
    assert [(m.gpu_instance_id, m.compute_instance_id, m.device_index, m.memory_total_mib) for m in migs] == [
        (1, 0, 0, 20096),
        (5, 0, 1, 9984),
    ]
    h200 = _smi(SAMPLES / "nvidia-smi" / "table_580_h200_mig_na.txt")
    assert h200.gpus[0].mig_mode == "Enabled" and h200.gpus[0].mig_devices[0].memory_total_mib == 71040
    assert h200.gpus[1].mig_devices == []


def test_xml_reads_framebuffer_not_bar1_memory() -> None:
    report = _smi(SAMPLES / "nvidia-smi" / "xml_v100x2_share.xml")
    assert [g.memory_total_mib for g in report.gpus] == [4309, 4309]
    assert [g.memory_free_mib for g in report.gpus] == [3740, 3928]


def test_seed_sample_parses_to_two_cards_of_4309_mib() -> None:
    if not SEED.exists():
        pytest.skip(f"seed not present at {SEED}")
    report = parse_nvidia_smi(SEED.read_text())  # the whole document, prose and all
    assert len(report.gpus) == 2
    assert [g.memory_total_mib for g in report.gpus] == [4309, 4309]
    assert [g.index for g in report.gpus] == [0, 1]


TF_FACTS = {
    # sample -> [(index, total bytes, free bytes, limit MiB, name)]
    "tf_1.5_found_device_seed.log": [
        (0, round(4.21 * 2**30), round(3.91 * 2**30), None, "Tesla V100-SXM2-16GB"),
        (1, round(4.21 * 2**30), round(3.91 * 2**30), None, "Tesla V100-SXM2-16GB"),
    ],
    "tf_1.2_total_memory_old.log": [(0, round(11.17 * 2**30), round(11.11 * 2**30), None, "Tesla K80")],
    "tf_1.12_created_tensorflow_device.log": [(0, round(14.73 * 2**30), round(14.60 * 2**30), 14116, "Tesla T4")],
    "tf_1.14_wrapped_80.log": [(0, None, None, 15216, "Tesla P100-PCIE-16GB")],
    "tf_ack_doc_created_2832mb.log": [(0, round(3.15 * 2**30), round(2.85 * 2**30), 2832, "Tesla V100-SXM2-16GB")],
    "tf_2.3_device_memory_size.log": [
        (0, round(15.78 * 2**30), None, 14760, "Tesla V100-SXM2-16GB"),
        (1, round(15.78 * 2**30), None, 14760, "Tesla V100-SXM2-16GB"),
    ],
    "tf_2.11_created_device.log": [
        (0, None, None, 3686, "Tesla V100-SXM2-16GB"),
        (1, None, None, 3686, "Tesla V100-SXM2-16GB"),
    ],
    "tf_2.16_absl_interleaved.log": [(0, None, None, 21986, "NVIDIA GeForce RTX 3090")],
    "torch_probe.log": [
        (0, 4309 << 20, 4099932160, None, "Tesla V100-SXM2-16GB"),
        (1, 4309 << 20, 4299161600, None, "Tesla V100-SXM2-16GB"),
    ],
    "torch_bare_props.log": [
        (0, 40326 << 20, None, None, "NVIDIA A100-SXM4-40GB"),
        (1, 40326 << 20, None, None, "NVIDIA A100-SXM4-40GB"),
    ],
    # an OOM message's free figure ("345.81 MiB free;", "of which 755.81 MiB is free") is
    # reported when no earlier line gave one; the first message of a GPU wins
    "torch_oom_1.1_cached.log": [(0, round(11.17 * 2**30), round(345.81 * 2**20), None, None)],
    "torch_oom_1.13_share_fraction.log": [(0, round(4.21 * 2**30), round(2.30 * 2**30), None, None)],
    "torch_oom_2.1_capacty_ddp.log": [
        (0, round(4.21 * 2**30), round(761.81 * 2**20), None, None),
        (1, round(4.21 * 2**30), round(755.81 * 2**20), None, None),
    ],
    # mem_get_info (exact) comes first for GPU 0, the properties repr for GPU 1; the OOMs agree
    "torch_oom_2.5_mixed_wrapped.log": [
        (0, 4309 << 20, 4286578688, None, "Tesla V100-SXM2-16GB"),
        (1, 4309 << 20, round(1.93 * 2**30), None, "Tesla V100-SXM2-16GB"),
    ],
}

# sample -> which line form gave each device's total, by index
TF_SOURCES = {
    "tf_1.5_found_device_seed.log": ["tf-total-memory", "tf-total-memory"],
    "tf_1.2_total_memory_old.log": ["tf-total-memory"],
    "tf_1.12_created_tensorflow_device.log": ["tf-total-memory"],
    "tf_1.14_wrapped_80.log": [None],
    "tf_ack_doc_created_2832mb.log": ["tf-total-memory"],
    "tf_2.3_device_memory_size.log": ["tf-device-memory-size", "tf-device-memory-size"],
    "tf_2.11_created_device.log": [None, None],
    "tf_2.16_absl_interleaved.log": [None],
    "torch_probe.log": ["torch-device-properties", "torch-device-properties"],
    "torch_bare_props.log": ["torch-device-properties", "torch-device-properties"],
    "torch_oom_1.1_cached.log": ["torch-oom-pre-2.1"],
    "torch_oom_1.13_share_fraction.log": ["torch-oom-pre-2.1"],
    "torch_oom_2.1_capacty_ddp.log": ["torch-oom-2.1+", "torch-oom-2.1+"],
    "torch_oom_2.5_mixed_wrapped.log": ["torch-mem-get-info", "torch-device-properties"],
}

# sample -> which line form gave each device's free figure, by index
TF_FREE_SOURCES = {
    "tf_1.5_found_device_seed.log": ["tf-free-memory", "tf-free-memory"],
    "tf_1.2_total_memory_old.log": ["tf-free-memory"],
    "tf_1.12_created_tensorflow_device.log": ["tf-free-memory"],
    "tf_1.14_wrapped_80.log": [None],
    "tf_ack_doc_created_2832mb.log": ["tf-free-memory"],
    "tf_2.3_device_memory_size.log": [None, None],
    "tf_2.11_created_device.log": [None, None],
    "tf_2.16_absl_interleaved.log": [None],
    "torch_probe.log": ["torch-mem-get-info", "torch-mem-get-info"],
    "torch_bare_props.log": [None, None],
    "torch_oom_1.1_cached.log": ["torch-oom-pre-2.1"],
    "torch_oom_1.13_share_fraction.log": ["torch-oom-pre-2.1"],
    "torch_oom_2.1_capacty_ddp.log": ["torch-oom-2.1+", "torch-oom-2.1+"],
    "torch_oom_2.5_mixed_wrapped.log": ["torch-mem-get-info", "torch-oom-2.1+"],
}


def test_every_tf_sample_has_hand_written_facts() -> None:
    assert {p.name for p in _samples("tf-log")} == set(TF_FACTS)


@pytest.mark.parametrize("name", sorted(TF_FACTS))
def test_tf_log_sample_facts(name: str) -> None:
    report = parse_tf_log((SAMPLES / "tf-log" / name).read_text())
    got = [(d.index, d.total_memory_bytes, d.free_memory_bytes, d.limit_mib, d.name) for d in report.devices]
    assert got == TF_FACTS[name]


def test_every_tf_sample_has_hand_written_sources() -> None:
    assert set(TF_SOURCES) == set(TF_FACTS) == set(TF_FREE_SOURCES)


@pytest.mark.parametrize("name", sorted(TF_SOURCES))
def test_tf_log_sample_total_sources(name: str) -> None:
    report = parse_tf_log((SAMPLES / "tf-log" / name).read_text())
    assert [d.total_memory_source for d in report.devices] == TF_SOURCES[name]


@pytest.mark.parametrize("name", sorted(TF_FREE_SOURCES))
def test_tf_log_sample_free_sources(name: str) -> None:
    report = parse_tf_log((SAMPLES / "tf-log" / name).read_text())
    assert [d.free_memory_source for d in report.devices] == TF_FREE_SOURCES[name]


def test_wide_csv_keeps_camel_case_fields_and_reads_placeholders() -> None:
    path = SAMPLES / "nvidia-smi" / "csv_wide_150_h100_share.txt"
    assert len(path.read_text().splitlines()[0].split(", ")) == 150
    gpu = _smi(path).gpus[1]
    assert gpu.other["timestamp"] == "2026/12/03 09:41:12.351"
    assert gpu.other["pci.baseClass"] == "0x3" and gpu.other["pci.subClass"] == "0x2"
    assert gpu.other["encoder.stats.sessionCount"] == "0"
    assert gpu.other["clocks_event_reasons.hw_slowdown"] == "Not Active"
    assert gpu.other["fabric.cliqueId"] is None  # [Not Supported]
    assert gpu.other["display_mode"] is None  # [Requested functionality has been deprecated]
    assert gpu.other["clocks_event_reasons_counters.sw_power_cap"] is None  # [Unknown Error]
    assert gpu.other["retired_pages.single_bit_ecc.count"] is None  # [Insufficient Permissions]
    assert gpu.other["power.draw"] == "512.08 W"
    # the protected-memory columns beside memory.* are not the card's memory
    assert gpu.other["protected_memory.total"] == "0 MiB"
    assert (gpu.memory_total_mib, gpu.memory_used_mib, gpu.memory_free_mib) == (40960, 32771, 7638)


def test_camel_case_csv_without_index_numbers_rows_in_order() -> None:
    report = _smi(SAMPLES / "nvidia-smi" / "csv_camelcase_no_index.txt")
    assert [g.index for g in report.gpus] == [0, 1, 2]
    assert [g.bus_id for g in report.gpus] == ["00000000:86:00.0", "00000000:AF:00.0", "00000000:D8:00.0"]
    assert [g.other["encoder.stats.averageFps"] for g in report.gpus] == ["0", "29", "0"]
    assert report.gpus[2].memory_free_mib is None  # [Insufficient Permissions]


def test_non_breaking_spaces_and_crlf_from_web_copies() -> None:
    text = (SAMPLES / "nvidia-smi" / "seed_470_v100_share.txt").read_text()
    mangled = text.replace("  ", "\u00a0 ").replace("\n", "\r\n")
    report = parse_nvidia_smi(mangled)
    assert [(g.name, g.memory_total_mib) for g in report.gpus] == [("Tesla V100-SXM2...", 4309)] * 2
