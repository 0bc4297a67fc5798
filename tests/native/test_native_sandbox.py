"""`sandbox_env` and `gpushare-conformance sandbox`: the container environment, reproduced."""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import PYTHON
from gpushare_conformance import native
from gpushare_conformance.sandbox import SandboxError, parse_mem_size, sandbox_env


def test_env_matches_the_device_plugin_contract(seed_inventory, native_root):
    env = sandbox_env(
        seed_inventory,
        [1, 2],
        4096,
        base_env={"PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "0"},
        native_root=native_root,
    )
    assert env["NVIDIA_VISIBLE_DEVICES"] == "1,2"
    assert env["GPUSHARE_MEMORY_LIMIT_0"] == env["GPUSHARE_MEMORY_LIMIT_1"] == "4096MiB"
    assert "GPUSHARE_MEMORY_LIMIT_2" not in env and "CUDA_VISIBLE_DEVICES" not in env
    assert env["LD_PRELOAD"] == str(native_root / "lib" / "libgpushare-shim.so")
    assert env["LD_LIBRARY_PATH"] == str(native_root / "mock-lib")
    assert sorted(os.listdir(env["LD_LIBRARY_PATH"])) == ["libcuda.so.1", "libnvidia-ml.so.1"]
    assert env["PATH"] == f"{native_root / 'bin'}:/usr/bin"
    assert env["GPUSHARE_MOCK_INVENTORY"] == str(seed_inventory.resolve())
    assert (
        env["ALIYUN_COM_GPU_MEM_IDX"],
        env["ALIYUN_COM_GPU_MEM_POD"],
        env["ALIYUN_COM_GPU_MEM_CONTAINER"],
        env["ALIYUN_COM_GPU_MEM_DEV"],
    ) == ("1,2", "8", "4", "15")
    assert env["GPUSHARE_USAGE_FILE"].startswith("/")
    other = sandbox_env(seed_inventory, [1, 2], 4096, native_root=native_root)
    assert other["GPUSHARE_USAGE_FILE"] != env["GPUSHARE_USAGE_FILE"]  # one accounting file per container


def test_no_isolation_leaves_the_shim_out(seed_inventory, native_root):
    env = sandbox_env(
        seed_inventory,
        [1, 2],
        4096,
        isolation=False,
        base_env={"LD_PRELOAD": "/x.so", "GPUSHARE_MEMORY_LIMIT": "1GiB"},
        native_root=native_root,
    )
    assert "LD_PRELOAD" not in env and not any(k.startswith("GPUSHARE_MEMORY_LIMIT") for k in env)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "1,2"


@pytest.mark.parametrize(
    ("visible", "mem", "message"),
    [
        ([3], 4096, "visible card 3: the inventory"),
        ([1, 1], 4096, "listed twice"),
        ([], 4096, "at least one card"),
        ([0], 20000, "card 0 (Tesla V100-SXM2-16GB) has only 16160 MiB"),
        ([0], 0, "must be positive"),
    ],
)
def test_bad_sandbox_input(seed_inventory, native_root, visible, mem, message):
    with pytest.raises(SandboxError, match=message.replace("(", r"\(").replace(")", r"\)")):
        sandbox_env(seed_inventory, visible, mem, native_root=native_root)


@pytest.mark.parametrize(("text", "mib"), [("4GiB", 4096), ("4096MiB", 4096), ("1TiB", 1 << 20), ("2048KiB", 2)])
def test_mem_sizes(text, mib):
    assert parse_mem_size(text) == mib


@pytest.mark.parametrize("text", ["4", "4x", "4GB", "-1GiB", "1B", "0GiB", "1KiB", "four GiB"])
def test_bad_mem_sizes(text):
    with pytest.raises(SandboxError, match=r"--mem-per-card="):
        parse_mem_size(text)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "gpushare_conformance", "sandbox", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_runs_the_seed_view(seed_inventory, native_root):
    proc = cli(
        "--inventory",
        str(seed_inventory),
        "--visible",
        "1,2",
        "--mem-per-card",
        "4GiB",
        "--",
        "sh",
        "-c",
        "nvidia-smi --query-gpu=memory.total --format=csv,noheader; gpushare-probe",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["4096 MiB", "4096 MiB"]
    assert proc.stderr.count("totalMemory: 4.00GiB") == 2
    bare = cli(
        "--inventory",
        str(seed_inventory),
        "--visible",
        "1,2",
        "--mem-per-card",
        "4GiB",
        "--no-isolation",
        "--",
        "nvidia-smi",
        "--query-gpu=memory.total",
        "--format=csv,noheader",
    )
    assert bare.stdout.splitlines() == ["16160 MiB", "16160 MiB"]


def test_cli_passes_the_exit_code_and_cleans_up(seed_inventory, native_root, tmp_path):
    proc = cli(
        "--inventory",
        str(seed_inventory),
        "--visible",
        "1",
        "--mem-per-card",
        "4GiB",
        "--",
        "sh",
        "-c",
        f"echo $GPUSHARE_USAGE_FILE > {tmp_path / 'f'}; gpushare-probe --device 0 --alloc-mib 5000",
    )
    assert proc.returncode == 2 and "CUDA_ERROR_OUT_OF_MEMORY" in proc.stdout
    assert not os.path.exists((tmp_path / "f").read_text().strip())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--visible", "1,2", "--mem-per-card", "4x"], "--mem-per-card='4x': expected an integer with unit"),
        (["--visible", "a,b", "--mem-per-card", "4GiB"], "--visible='a,b': expected a comma list"),
        (["--visible", "9", "--mem-per-card", "4GiB"], "visible card 9"),
        (["--visible", "1", "--mem-per-card", "4GiB"], "a command is required"),
    ],
)
def test_cli_errors(seed_inventory, args, message):
    extra = [] if "command" in message else ["--", "true"]
    proc = cli("--inventory", str(seed_inventory), *args, *extra)
    assert proc.returncode == 2 and message in proc.stderr


def test_native_dir_override(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUSHARE_NATIVE_DIR", str(tmp_path))
    assert native.native_dir() == tmp_path
    with pytest.raises(native.NativeBuildError, match="lacks lib/libnvidia-ml.so.1"):
        native.ensure_built()
