"""The C code under AddressSanitizer and valgrind memcheck: short runs, no errors."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import PYTHON, run, tool
from gpushare_conformance import native
from gpushare_conformance.sandbox import sandbox_env


@pytest.fixture(scope="module")
def asan_root():
    return native.ensure_built(asan=True)


def asan_env(seed_inventory, asan_root, tmp_path, isolation=True):
    env = sandbox_env(
        seed_inventory,
        [1, 2],
        4096,
        isolation=isolation,
        base_env=os.environ,
        usage_file=tmp_path / "usage",
        native_root=asan_root,
    )
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    # The sanitizer runtime must come first when an instrumented library is preloaded.
    env["LD_PRELOAD"] = ":".join(p for p in (libasan, env.get("LD_PRELOAD")) if p)
    env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0:exitcode=86"
    return env


def test_asan_probe_nvidia_smi_and_shim(seed_inventory, asan_root, tmp_path):
    env = asan_env(seed_inventory, asan_root, tmp_path)
    probe, smi = tool(asan_root, "gpushare-probe"), tool(asan_root, "nvidia-smi")
    for cmd, rc in (
        ([probe], 0),
        ([probe, "--device", "0", "--alloc-mib", "1000", "--count", "3"], 0),
        ([probe, "--device", "1", "--alloc-mib", "5000"], 2),
        ([smi], 0),
        ([smi, "-L"], 0),
        ([smi, "--query-gpu=index,memory.total", "--format=csv"], 0),
    ):
        proc = run(cmd, env)
        assert "ERROR: AddressSanitizer" not in proc.stderr and "LeakSanitizer" not in proc.stderr, proc.stderr
        assert proc.returncode == rc, (cmd, proc.stdout, proc.stderr)
    assert "4096MiB" in run([smi], env).stdout


def test_asan_pynvml_through_the_shim(seed_inventory, asan_root, tmp_path):
    env = asan_env(seed_inventory, asan_root, tmp_path)
    env["ASAN_OPTIONS"] = "detect_leaks=0:exitcode=86"  # the interpreter itself keeps memory at exit
    script = (
        "import pynvml; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(1); "
        "print(pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2).total)"
    )
    proc = run([PYTHON, "-c", script], env)
    assert "AddressSanitizer" not in proc.stderr, proc.stderr
    assert proc.returncode == 0 and proc.stdout.strip() == str(4096 << 20)


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is in ci/host-packages.txt; install it")
@pytest.mark.parametrize("isolation", [True, False])
def test_valgrind_memcheck_probe(seed_env, bare_env, native_root, isolation):
    env = seed_env if isolation else bare_env
    probe = tool(native_root, "gpushare-probe")
    for args in ([], ["--device", "0", "--alloc-mib", "1000"], ["--device", "0", "--alloc-mib", "9000"]):
        proc = run(
            [
                "valgrind",
                "--error-exitcode=99",
                "--leak-check=full",
                "--errors-for-leak-kinds=definite",
                "-q",
                probe,
                *args,
            ],
            env,
            timeout=120,
        )
        assert proc.returncode != 99, proc.stderr
        assert "Invalid read" not in proc.stderr and "uninitialised" not in proc.stderr, proc.stderr
