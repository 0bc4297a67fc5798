"""`gpushare-conformance parse ...` prints JSON, or exits 1 with the reason on stderr."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpushare_conformance.cli import main

SAMPLES = Path(__file__).parent / "samples"


def test_parse_nvidia_smi_file(capsys) -> None:
    assert main(["parse", "nvidia-smi", str(SAMPLES / "nvidia-smi" / "seed_470_v100_share.txt")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["driver_version"] == "470.161.03"
    assert [(g["index"], g["memory_total_mib"]) for g in out["gpus"]] == [(0, 4309), (1, 4309)]


def test_parse_tf_log_from_dash(monkeypatch, capsys) -> None:
    text = (SAMPLES / "tf-log" / "tf_1.5_found_device_seed.log").read_text()
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert main(["parse", "tf-log", "-"]) == 0
    devices = json.loads(capsys.readouterr().out)["devices"]
    assert [d["index"] for d in devices] == [0, 1]
    assert all(d["total_memory_bytes"] == round(4.21 * 2**30) for d in devices)


def test_parse_headerless_csv_with_fields(capsys) -> None:
    path = SAMPLES / "nvidia-smi" / "csv_noheader_nounits_fields.txt"
    assert main(["parse", "nvidia-smi", str(path), "--fields", "index,name,memory.total,memory.used"]) == 0
    assert [g["memory_total_mib"] for g in json.loads(capsys.readouterr().out)["gpus"]] == [8192, 8192]
    assert main(["parse", "nvidia-smi", str(path)]) == 1
    assert "without a header" in capsys.readouterr().err


def test_unparseable_input_exits_1_with_message(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("not a table\n")
    assert main(["parse", "nvidia-smi", str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "expected nvidia-smi output" in captured.err and "line 1" in captured.err


def test_missing_file_exits_1(tmp_path, capsys) -> None:
    assert main(["parse", "tf-log", str(tmp_path / "absent.log")]) == 1
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kind,sample", [("nvidia-smi", "nvidia-smi/table_550_a100.txt"), ("tf-log", "tf-log/tf_2.11_created_device.log")]
)
def test_dev_stdin_through_the_console_script(kind: str, sample: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gpushare_conformance", "parse", kind, "/dev/stdin"],
        input=(SAMPLES / sample).read_text(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)


def test_parse_tf_log_reports_oom_totals_and_their_source(capsys) -> None:
    assert main(["parse", "tf-log", str(SAMPLES / "tf-log" / "torch_oom_2.1_capacty_ddp.log")]) == 0
    devices = json.loads(capsys.readouterr().out)["devices"]
    assert [(d["index"], d["total_memory_bytes"], d["total_memory_source"]) for d in devices] == [
        (0, round(4.21 * 2**30), "torch-oom-2.1+"),
        (1, round(4.21 * 2**30), "torch-oom-2.1+"),
    ]


def test_parse_tf_log_conflicting_totals_exit_1(tmp_path, capsys) -> None:
    log = tmp_path / "oom.log"
    log.write_text(
        "torch.cuda.mem_get_info(0): (0, 4518313984)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 15.77 GiB of which 0 bytes is free.\n"
    )
    assert main(["parse", "tf-log", str(log)]) == 1
    err = capsys.readouterr().err
    assert "GPU 0 total 15.77 GiB" in err and "disagrees" in err and "line 2" in err


def test_parse_wide_headerless_csv_with_fields(capsys) -> None:
    path = SAMPLES / "nvidia-smi" / "csv_noheader_wide_181.txt"
    fields = path.with_name(path.name + ".fields").read_text().strip()
    assert main(["parse", "nvidia-smi", str(path), "--fields", fields]) == 0
    gpus = json.loads(capsys.readouterr().out)["gpus"]
    assert [(g["index"], g["memory_total_mib"]) for g in gpus] == [(0, 40960), (1, 40960)]
    assert gpus[0]["other"]["fabric.cliqueId"] is None and gpus[0]["other"]["encoder.stats.sessionCount"] == "0"
