"""The shim over the real NVIDIA libraries: nvidia-smi and pynvml show the share,
allocation past it fails on every path, two processes share one budget, and a
malformed limit is refused."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.gpu

SHARE_MIB = 2048
PATHS = ("alloc", "pitch", "managed", "async", "pool", "vmm")
# Below what cuMemGetInfo tells a process is free: the driver's granularity on some
# paths (a pool, virtual memory) may take a little more than asked.
HEADROOM_MIB = 64


def _env(driver, shim, limit: str = f"{SHARE_MIB}MiB", usage=None) -> dict[str, str]:
    env = dict(driver.env, LD_PRELOAD=str(shim), GPUSHARE_MEMORY_LIMIT=limit, CUDA_VISIBLE_DEVICES="0")
    env["NVIDIA_VISIBLE_DEVICES"] = env.get("NVIDIA_VISIBLE_DEVICES", "0") or "0"
    if usage is not None:
        env["GPUSHARE_USAGE_FILE"] = str(usage)
    return env


def _totals(driver, env) -> list[int]:
    out = subprocess.run(
        [driver.nvidia_smi, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return [int(line.strip()) for line in out.stdout.splitlines() if line.strip()]


def test_nvidia_smi_shows_the_share_not_the_card(driver, shim):
    physical = _totals(driver, dict(driver.env))
    shared = _totals(driver, _env(driver, shim))
    assert shared and all(SHARE_MIB <= t <= SHARE_MIB * 1.1 for t in shared), (shared, physical)
    assert all(t < p for t, p in zip(shared, physical)), (shared, physical)


def test_pynvml_shows_the_share(driver, shim):
    code = (
        "import pynvml; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0);"
        "print(pynvml.nvmlDeviceGetMemoryInfo(h).total // 2**20)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(driver, shim), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert SHARE_MIB <= int(out.stdout.strip()) <= SHARE_MIB * 1.1


def _probe(driver, shim, probe, api: str, mib: int, usage, hold: float | None = None):
    argv = [str(probe), "--device", "0", "--api", api, "--alloc-mib", str(mib)]
    if hold:
        argv += ["--hold-seconds", str(hold)]
    return subprocess.Popen(
        argv, env=_env(driver, shim, usage=usage), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _free_mib(driver, shim, probe, usage) -> int:
    """What cuMemGetInfo tells a process holding its context on device 0 is free: the
    share less what its context is charged.  What a context costs differs between
    drivers, so "within the share" is read from the driver, not assumed."""
    out = subprocess.run(
        [str(probe), "--raw"], env=_env(driver, shim, usage=usage), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
    free = re.search(r"^device=0 .* free_bytes=(\d+) ", out.stdout, re.M)
    assert free, out.stdout
    return int(free.group(1)) >> 20


@pytest.mark.parametrize("api", PATHS)
def test_allocation_past_the_share_fails_on_every_path(driver, shim, probe, api, tmp_path):
    free_mib = _free_mib(driver, shim, probe, tmp_path / "usage")
    assert HEADROOM_MIB < free_mib <= SHARE_MIB, f"cuMemGetInfo tells {free_mib} MiB free of a {SHARE_MIB} MiB share"
    within = _probe(driver, shim, probe, api, free_mib - HEADROOM_MIB, tmp_path / "usage")
    out, _ = within.communicate(timeout=120)
    if "CUDA_ERROR_NOT_SUPPORTED" in out:
        pytest.skip(f"--api {api}: this driver or card does not support the path: {out.strip()[-200:]}")
    assert within.returncode == 0, out
    past = _probe(driver, shim, probe, api, SHARE_MIB + 1, tmp_path / "usage")
    out, _ = past.communicate(timeout=120)
    assert past.returncode != 0 and "CUDA_ERROR_OUT_OF_MEMORY" in out, f"--api {api}: {out}"


def test_two_processes_share_one_budget(driver, shim, probe, tmp_path):
    usage = tmp_path / "usage"
    holder = _probe(driver, shim, probe, "alloc", SHARE_MIB // 2 + 256, usage, hold=20)
    try:
        time.sleep(5)
        assert holder.poll() is None, holder.stdout.read()
        second = _probe(driver, shim, probe, "alloc", SHARE_MIB // 2, usage)
        out, _ = second.communicate(timeout=120)
        assert second.returncode != 0 and "CUDA_ERROR_OUT_OF_MEMORY" in out, out
    finally:
        holder.kill()
        holder.wait()


def test_a_malformed_limit_is_refused(driver, shim):
    out = subprocess.run(
        [driver.nvidia_smi], env=_env(driver, shim, limit="4x"), capture_output=True, text=True, timeout=60
    )
    assert "gpushare-shim: invalid GPUSHARE_MEMORY_LIMIT" in out.stderr + out.stdout
    assert out.returncode != 0
