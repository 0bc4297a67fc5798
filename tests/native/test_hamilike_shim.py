"""The hami-like isolation library (libgpushare-shim-hamilike.so) over the mock driver.

HAMi-core reads ``CUDA_DEVICE_MEMORY_LIMIT_<i>=4096m`` and charges every process's CUDA
context (about 300 MiB on real cards) to the share: the figures a container with a
4096 MiB share sees are nvidia-smi total 4096 MiB, free 3796 MiB once a process has a
context, 4097 MiB and 4032 MiB in one allocation refused, the told free amount minus
a few MiB granted. The hami-like peer of the reference stack must show exactly these.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import CONTEXT_MIB, PYTHON, run, tool

SHARE_MIB = 4096
# HAMi-core's charge for a context, which the hami-like build makes (native/src/shim_ctx.c
# under SHIM_HAMI_LIKE); the reference shim charges conftest.CONTEXT_MIB instead.
HAMI_CONTEXT_MIB = 300
MIB = 1 << 20


@pytest.fixture
def hami_env(seed_inventory: Path, native_root: Path, tmp_path: Path) -> dict[str, str]:
    """A hami-like container holding 4096 MiB on each of the seed's cards 1 and 2."""
    lib = native_root / "lib" / "libgpushare-shim-hamilike.so"
    assert lib.is_file(), f"{lib} missing: make -C native"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSHARE_", "CUDA_DEVICE_MEMORY"))}
    env.update(
        LD_LIBRARY_PATH=str(native_root / "mock-lib"),
        PATH=f"{native_root / 'bin'}:{env.get('PATH', os.defpath)}",
        GPUSHARE_MOCK_INVENTORY=str(seed_inventory),
        NVIDIA_VISIBLE_DEVICES="1,2",
        LD_PRELOAD=str(lib),
        CUDA_DEVICE_MEMORY_LIMIT_0=f"{SHARE_MIB}m",
        CUDA_DEVICE_MEMORY_LIMIT_1=f"{SHARE_MIB}m",
        CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / "hamilike.cache"),
    )
    return env


def probe_free_mib(env: dict[str, str], root: Path) -> dict[int, tuple[int, int]]:
    """(free MiB, total MiB) per device, as a process holding its primary context sees them."""
    out = run([tool(root, "gpushare-probe"), "--raw"], env)
    assert out.returncode == 0, out.stdout + out.stderr
    seen = {}
    for line in out.stdout.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f and not f.startswith("name="))
        seen[int(fields["device"])] = (int(fields["free_bytes"]) // MIB, int(fields["total_bytes"]) // MIB)
    return seen


def alloc(env: dict[str, str], root: Path, mib: int, device: int = 0) -> subprocess.CompletedProcess[str]:
    return run([tool(root, "gpushare-probe"), "--device", str(device), "--alloc-mib", str(mib)], env)


def test_nvidia_smi_total_is_the_share(hami_env, native_root):
    smi = run([tool(native_root, "nvidia-smi"), "--query-gpu=memory.total", "--format=csv,noheader,nounits"], hami_env)
    assert smi.returncode == 0, smi.stderr
    assert smi.stdout.split() == [str(SHARE_MIB), str(SHARE_MIB)]


def test_context_is_charged_to_the_share(hami_env, native_root):
    seen = probe_free_mib(hami_env, native_root)
    assert seen == {0: (SHARE_MIB - HAMI_CONTEXT_MIB, SHARE_MIB), 1: (SHARE_MIB - HAMI_CONTEXT_MIB, SHARE_MIB)}


def test_the_share_plus_one_mib_is_refused(hami_env, native_root):
    out = alloc(hami_env, native_root, SHARE_MIB + 1)
    assert out.returncode == 2 and "CUDA_ERROR_OUT_OF_MEMORY" in out.stdout, out.stdout + out.stderr


def test_nearly_the_whole_share_in_one_go_is_refused_because_the_context_counts(hami_env, native_root):
    out = alloc(hami_env, native_root, 4032)
    assert out.returncode == 2 and "CUDA_ERROR_OUT_OF_MEMORY" in out.stdout, out.stdout + out.stderr


def test_the_told_free_amount_minus_a_few_mib_is_granted(hami_env, native_root):
    free_mib = probe_free_mib(hami_env, native_root)[0][0]
    out = alloc(hami_env, native_root, free_mib - 4)
    assert out.returncode == 0, out.stdout + out.stderr
    assert alloc(hami_env, native_root, free_mib + 1).returncode == 2


def test_each_process_pays_its_own_context_and_gives_it_back_at_exit(hami_env, native_root):
    holder = subprocess.Popen(
        [tool(native_root, "gpushare-probe"), "--device", "0", "--alloc-mib", "1000", "--hold-seconds", "60"],
        env=hami_env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert "allocated" in holder.stdout.readline()
        # The holder's 1000 MiB and its context, then this process's own context.
        assert probe_free_mib(hami_env, native_root)[0] == (SHARE_MIB - 1000 - 2 * HAMI_CONTEXT_MIB, SHARE_MIB)
        assert probe_free_mib(hami_env, native_root)[1] == (SHARE_MIB - HAMI_CONTEXT_MIB, SHARE_MIB)
    finally:
        holder.kill()
        holder.wait()
    assert probe_free_mib(hami_env, native_root)[0] == (SHARE_MIB - HAMI_CONTEXT_MIB, SHARE_MIB)


CTX_CREATE = textwrap.dedent(
    """
    import ctypes, sys
    cu = ctypes.CDLL("libcuda.so.1")
    MIB = 1 << 20
    def check(rc, what):
        if rc:
            print(f"{what} failed: {rc}"); sys.exit(3)
    def free_mib():
        f, t = ctypes.c_size_t(), ctypes.c_size_t()
        check(cu.cuMemGetInfo_v2(ctypes.byref(f), ctypes.byref(t)), "cuMemGetInfo_v2")
        return f.value // MIB
    check(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    a, b = ctypes.c_void_p(), ctypes.c_void_p()
    check(cu.cuCtxCreate_v2(ctypes.byref(a), 0, dev), "cuCtxCreate_v2 a")
    one = free_mib()
    check(cu.cuCtxCreate_v2(ctypes.byref(b), 0, dev), "cuCtxCreate_v2 b")
    two = free_mib()
    check(cu.cuCtxDestroy_v2(b), "cuCtxDestroy_v2 b")
    check(cu.cuCtxSetCurrent(a), "cuCtxSetCurrent a")
    after = free_mib()
    p = ctypes.c_uint64()
    big = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(4032 * MIB))
    print(one, two, after, big)
    """
)


def test_created_contexts_are_charged_once_per_card_per_process(hami_env, native_root):
    out = run([PYTHON, "-c", CTX_CREATE], hami_env)
    assert out.returncode == 0, out.stdout + out.stderr
    one, two, after, big = (int(v) for v in out.stdout.split())
    assert (one, two, after) == (SHARE_MIB - HAMI_CONTEXT_MIB,) * 3
    assert big == 2  # CUDA_ERROR_OUT_OF_MEMORY


def test_reference_shim_charges_contexts_within_the_share(seed_env, native_root):
    """Control: the reference shim (GPUSHARE_MEMORY_LIMIT_<i>) charges its own figure
    for a context, and grants all it tells free: the share minus the context, to the MiB."""
    seen = probe_free_mib(seed_env, native_root)
    assert seen == {0: (SHARE_MIB - CONTEXT_MIB, SHARE_MIB), 1: (SHARE_MIB - CONTEXT_MIB, SHARE_MIB)}
    assert alloc(seed_env, native_root, SHARE_MIB - CONTEXT_MIB).returncode == 0
    out = alloc(seed_env, native_root, SHARE_MIB - CONTEXT_MIB + 1)
    assert out.returncode == 2 and "CUDA_ERROR_OUT_OF_MEMORY" in out.stdout, out.stdout + out.stderr
