"""The shim holds the share on every device-allocation path of the driver API (plain,
pitched, managed, stream-ordered, pools, virtual memory), whichever way the program
finds the entry point, and NVML and CUDA report one usage for it."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CONTEXT_MIB, KEPT_MIB, PYTHON, SEED_INVENTORY, run, tool
from gpushare_conformance import native
from gpushare_conformance.sandbox import sandbox_env

PATHS = ["alloc", "pitch", "managed", "async", "pool", "vmm"]
ENTRY = {
    "alloc": "cuMemAlloc_v2",
    "pitch": "cuMemAllocPitch_v2",
    "managed": "cuMemAllocManaged",
    "async": "cuMemAllocAsync",
    "pool": "cuMemAllocFromPoolAsync",
    "vmm": "cuMemCreate",
}
MIB = 1 << 20
SHARE_MIB = 4096  # seed_env: 4 GiB on each card
# Four blocks of this fill all the probe may allocate beside its context, exactly.
BLOCK_MIB = (SHARE_MIB - CONTEXT_MIB) // 4
assert BLOCK_MIB * 4 == SHARE_MIB - CONTEXT_MIB and BLOCK_MIB % 2 == 0


def probe(env, root, path: str, mib: int, count: int, hold: int = 0, **kw):
    cmd = [tool(root, "gpushare-probe"), "--device", "0", "--alloc-mib", str(mib), "--count", str(count), "--api", path]
    if hold:
        return subprocess.Popen(cmd + ["--hold-seconds", str(hold)], env=env, stdout=subprocess.PIPE, text=True, **kw)
    return run(cmd, env)


@pytest.mark.parametrize("path", PATHS)
def test_share_holds_on_path(path, seed_env, bare_env, native_root):
    fits = probe(seed_env, native_root, path, BLOCK_MIB, 4)  # exactly the 4 GiB share, with the context
    assert fits.returncode == 0, fits.stdout + fits.stderr
    assert f"via {ENTRY[path]}" in fits.stdout and "(free 0 of 4294967296 bytes)" in fits.stdout
    over = probe(seed_env, native_root, path, BLOCK_MIB, 5)
    assert over.returncode == 2, over.stdout
    assert "CUDA_ERROR_OUT_OF_MEMORY" in over.stdout and f"--api {path}" in over.stdout
    control = probe(bare_env, native_root, path, BLOCK_MIB, 5)  # without the shim the card has room
    assert control.returncode == 0, control.stdout + control.stderr


def test_probe_refuses_an_unknown_path(seed_env, native_root):
    bad = probe(seed_env, native_root, "texture", 1, 1)
    assert bad.returncode == 64 and "--api expects one of alloc, pitch, managed, async, pool, vmm" in bad.stderr


# A worker that allocates and frees through every path with ctypes (entry points found
# with dlsym, or with cuGetProcAddress when RESOLVE=proc, asking for the per-thread
# default-stream variants when RESOLVE=ptds), driven by JSON lines.
WORKER = r"""
import ctypes, json, os, sys
lib = ctypes.CDLL("libcuda.so.1")
U64 = ctypes.c_uint64
def resolve(name, base=None, version=12000):
    how = os.environ.get("RESOLVE", "dlsym")
    if how == "dlsym":
        return getattr(lib, name)
    fn = ctypes.c_void_p()
    flags = 2 if how == "ptds" else 0  # CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
    assert lib.cuGetProcAddress_v2((base or name).encode(), ctypes.byref(fn), version, flags, None) == 0, name
    return ctypes.CFUNCTYPE(ctypes.c_int)(fn.value)  # cdecl: extra arguments pass as given
lib.cuInit(0)
ctx = ctypes.c_void_p()
assert lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0 and lib.cuCtxSetCurrent(ctx) == 0
print(json.dumps({"context": "held"}), flush=True)  # charged to the share from here on
class Loc(ctypes.Structure): _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]
class PoolProps(ctypes.Structure):
    _fields_ = [("allocType", ctypes.c_int), ("handleTypes", ctypes.c_int), ("location", Loc),
                ("win32", ctypes.c_void_p), ("maxSize", ctypes.c_size_t), ("usage", ctypes.c_ushort),
                ("reserved", ctypes.c_ubyte * 54)]
class Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", Loc),
                ("win32", ctypes.c_void_p), ("compression", ctypes.c_ubyte), ("gpuDirect", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]
class Access(ctypes.Structure): _fields_ = [("location", Loc), ("flags", ctypes.c_int)]
pool = ctypes.c_void_p()
assert lib.cuMemPoolCreate(ctypes.byref(pool), ctypes.byref(PoolProps(allocType=1, location=Loc(1, 0)))) == 0
prop = Prop(type=1, location=Loc(1, 0))
alloc_v2 = resolve("cuMemAlloc_v2", "cuMemAlloc")
pitch_v2 = resolve("cuMemAllocPitch_v2", "cuMemAllocPitch")
managed = resolve("cuMemAllocManaged")
alloc_async = resolve("cuMemAllocAsync")
from_pool = resolve("cuMemAllocFromPoolAsync")
free_async = resolve("cuMemFreeAsync")
create = resolve("cuMemCreate")
release = resolve("cuMemRelease")
free_v2 = resolve("cuMemFree_v2", "cuMemFree")
live = {}
def alloc(path, n):
    p = U64()
    if path == "alloc": rc = alloc_v2(ctypes.byref(p), ctypes.c_size_t(n))
    elif path == "pitch":
        pitch = ctypes.c_size_t()
        rc = pitch_v2(ctypes.byref(p), ctypes.byref(pitch), ctypes.c_size_t(1 << 20), ctypes.c_size_t(n >> 20), 4)
    elif path == "managed": rc = managed(ctypes.byref(p), ctypes.c_size_t(n), 1)
    elif path == "async": rc = alloc_async(ctypes.byref(p), ctypes.c_size_t(n), None)
    elif path == "pool": rc = from_pool(ctypes.byref(p), ctypes.c_size_t(n), pool, None)
    else:
        rc = lib.cuMemAddressReserve(ctypes.byref(p), ctypes.c_size_t(n), ctypes.c_size_t(0), U64(0), ctypes.c_ulonglong(0))
        if rc: return rc, None
        h = U64()
        rc = create(ctypes.byref(h), ctypes.c_size_t(n), ctypes.byref(prop), ctypes.c_ulonglong(0))
        if rc:
            lib.cuMemAddressFree(p, ctypes.c_size_t(n)); return rc, None
        acc = Access(Loc(1, 0), 3)
        assert lib.cuMemMap(p, ctypes.c_size_t(n), ctypes.c_size_t(0), h, ctypes.c_ulonglong(0)) == 0
        assert lib.cuMemSetAccess(p, ctypes.c_size_t(n), ctypes.byref(acc), ctypes.c_size_t(1)) == 0
        return 0, (p.value, h.value)
    return rc, p.value
def free(path, handle, n):
    if path in ("async", "pool"): return free_async(U64(handle), None)
    if path == "vmm":
        p, h = handle
        return (lib.cuMemUnmap(U64(p), ctypes.c_size_t(n)) or release(U64(h)) or lib.cuMemAddressFree(U64(p), ctypes.c_size_t(n)))
    return free_v2(U64(handle))
def used():
    f, t = ctypes.c_size_t(), ctypes.c_size_t()
    assert lib.cuMemGetInfo_v2(ctypes.byref(f), ctypes.byref(t)) == 0
    import pynvml
    pynvml.nvmlInit()
    m = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0))
    pynvml.nvmlShutdown()
    return {"cuda": t.value - f.value, "cuda_total": t.value, "nvml": m.used, "nvml_total": m.total}
for line in sys.stdin:
    cmd = json.loads(line)
    if cmd[0] == "alloc":
        rc, h = alloc(cmd[1], cmd[2])
        if rc == 0: live[len(live) and max(live) + 1] = (cmd[1], h, cmd[2])
        out = {"rc": rc, "id": max(live) if rc == 0 else None}
    elif cmd[0] == "free":
        path, h, n = live.pop(cmd[1])
        out = {"rc": free(path, h, n)}
    elif cmd[0] == "used": out = used()
    else:
        for k in list(live): free(*live.pop(k))
        lib.cuMemPoolDestroy(pool)
        out = {"rc": 0}
    print(json.dumps(out), flush=True)
"""


class Worker:
    """A worker process; it is back once it holds its primary context (which the shim
    charges to the share), so that every figure read after counts it."""

    def __init__(self, env: dict[str, str], script: Path):
        self.p = subprocess.Popen(
            [PYTHON, str(script)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.p.stdout.readline()
        if not line:
            self.close()
            raise AssertionError(f"worker died: {self.p.stderr.read()[-2000:]}")
        assert json.loads(line) == {"context": "held"}, line

    def ask(self, *cmd) -> dict:
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise AssertionError(f"worker died: {self.p.stderr.read()[-2000:]}")
        return json.loads(line)

    def close(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def share_env(tmp: Path, mib: int, **extra) -> dict[str, str]:
    inv = tmp / "inventory.yaml"
    inv.write_text(SEED_INVENTORY)
    env = sandbox_env(inv, [1, 2], mib, base_env=os.environ, usage_file=tmp / "usage", native_root=native.native_dir())
    env.update(extra)
    return env


@pytest.mark.parametrize("resolve", ["dlsym", "proc", "ptds"])
@pytest.mark.parametrize("path", PATHS)
def test_entry_points_found_either_way_hold_the_share(path, resolve, native_root, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    w = Worker(share_env(tmp_path, 64 + CONTEXT_MIB, RESOLVE=resolve), script)  # 64 MiB beside the context
    try:
        assert w.ask("alloc", path, 48 * MIB)["rc"] == 0
        assert w.ask("alloc", path, 32 * MIB)["rc"] == 2, "past the share: CUDA_ERROR_OUT_OF_MEMORY"
        assert w.ask("alloc", path, 16 * MIB)["rc"] == 0, "up to the share"
    finally:
        w.close()


@pytest.mark.parametrize("path", PATHS)
def test_nvml_and_cuda_report_one_usage(path, native_root, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = share_env(tmp_path, 1024)
    holder, reader = Worker(env, script), Worker(env, script)
    contexts = 2 * CONTEXT_MIB * MIB  # each process holds its context
    try:
        assert holder.ask("alloc", path, 300 * MIB)["rc"] == 0
        for who in (holder, reader):  # the holder, and another process of the container
            u = who.ask("used")
            assert u["cuda_total"] == u["nvml_total"] == 1024 * MIB
            assert u["cuda"] == u["nvml"] == 300 * MIB + contexts, u
        holder.ask("quit")
        u = reader.ask("used")
        assert u["cuda"] == u["nvml"] and contexts <= u["cuda"] <= contexts + KEPT_MIB * MIB, u
        holder.close()  # its context goes with it
        u = reader.ask("used")
        assert u["cuda"] == u["nvml"] == CONTEXT_MIB * MIB, u
    finally:
        holder.close()
        reader.close()


LIMIT_MIB = 64  # what the two workers may allocate together, beside their two contexts
op = st.one_of(
    st.tuples(st.just("alloc"), st.integers(0, 1), st.sampled_from(PATHS), st.integers(1, 16).map(lambda k: 2 * k)),
    st.tuples(st.just("free"), st.integers(0, 1), st.integers(0, 1000)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=24))
def test_two_processes_on_random_paths_never_exceed_the_share(ops):
    with tempfile.TemporaryDirectory(prefix="gpushare-prop-") as tmp:
        script = Path(tmp) / "worker.py"
        script.write_text(WORKER)
        contexts = 2 * CONTEXT_MIB * MIB
        env = share_env(Path(tmp), LIMIT_MIB + 2 * CONTEXT_MIB)
        workers = [Worker(env, script), Worker(env, script)]
        live: list[dict[int, int]] = [{}, {}]
        try:
            for o in ops:
                who = o[1]
                total = sum(sum(d.values()) for d in live)
                if o[0] == "alloc":
                    size = o[3] * MIB
                    r = workers[who].ask("alloc", o[2], size)
                    if r["rc"] == 0:
                        live[who][r["id"]] = size
                        assert total + size <= LIMIT_MIB * MIB, f"share exceeded on {o[2]}: {total + size}"
                    else:  # the other process may keep a page it freed
                        assert r["rc"] == 2 and total + size + KEPT_MIB * MIB > LIMIT_MIB * MIB, (
                            f"{o[2]} refused {size} at {total}: {r}"
                        )
                elif live[who]:
                    key = sorted(live[who])[o[2] % len(live[who])]
                    assert workers[who].ask("free", key)["rc"] == 0
                    del live[who][key]
                u = workers[who].ask("used")
                held = contexts + sum(sum(d.values()) for d in live)
                assert u["cuda"] == u["nvml"] and held <= u["cuda"] <= held + KEPT_MIB * MIB, (o, u)
            for w in workers:
                w.ask("quit")
            u = workers[0].ask("used")
            assert u["cuda"] == u["nvml"] and contexts <= u["cuda"] <= contexts + KEPT_MIB * MIB, u
            for w in workers:
                w.close()  # their contexts go with them
            workers.append(Worker(env, script))
            u = workers[-1].ask("used")
            assert u["cuda"] == u["nvml"] == CONTEXT_MIB * MIB, u  # its own context only
        finally:
            for w in workers:
                w.close()


@pytest.mark.parametrize("path", PATHS)
def test_paths_under_address_sanitizer(path, seed_inventory, tmp_path):
    """The mock driver and the shim, built with AddressSanitizer, on every path."""
    root = native.ensure_built(asan=True)
    env = sandbox_env(
        seed_inventory, [1, 2], 4096, base_env=os.environ, usage_file=tmp_path / "usage", native_root=root
    )
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    env["LD_PRELOAD"] = ":".join(p for p in (libasan, env.get("LD_PRELOAD")) if p)
    fits, over = probe(env, root, path, BLOCK_MIB, 4), probe(env, root, path, BLOCK_MIB, 5)
    assert fits.returncode == 0 and "Sanitizer" not in fits.stderr, fits.stderr[-3000:]
    assert over.returncode == 2 and "Sanitizer" not in over.stderr, over.stderr[-3000:]


ARRAYS = r"""
import ctypes, json
lib = ctypes.CDLL("libcuda.so.1")
lib.cuInit(0)
ctx = ctypes.c_void_p()
assert lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0 and lib.cuCtxSetCurrent(ctx) == 0
S = ctypes.c_size_t
class Desc3D(ctypes.Structure):
    _fields_ = [("Width", S), ("Height", S), ("Depth", S), ("Format", ctypes.c_int), ("NumChannels", ctypes.c_uint),
                ("Flags", ctypes.c_uint)]
class Desc(ctypes.Structure):
    _fields_ = [("Width", S), ("Height", S), ("Format", ctypes.c_int), ("NumChannels", ctypes.c_uint)]
FLOAT = 0x20
def used():
    f, t = S(), S(); lib.cuMemGetInfo_v2(ctypes.byref(f), ctypes.byref(t)); return t.value - f.value
arrays, out = [], {"rc": []}
for i in range(5):  # 16 MiB each: 1024 x 1024 float4
    a = ctypes.c_void_p()
    rc = lib.cuArray3DCreate_v2(ctypes.byref(a), ctypes.byref(Desc3D(1024, 1024, 0, FLOAT, 4, 0)))
    out["rc"].append(rc)
    if rc == 0: arrays.append(a)
out["used"] = used()
out["destroy"] = lib.cuArrayDestroy(arrays.pop())
a = ctypes.c_void_p()
out["2d_fits"] = lib.cuArrayCreate_v2(ctypes.byref(a), ctypes.byref(Desc(1024, 1024, FLOAT, 4)))
out["after"] = used()
print(json.dumps(out))
"""


def test_cuda_arrays_hold_the_share(native_root, tmp_path):
    proc = run([PYTHON, "-c", ARRAYS], share_env(tmp_path, 64 + CONTEXT_MIB))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["rc"] == [0, 0, 0, 0, 2], "four 16 MiB arrays fill the 64 MiB beside the context, the fifth fails"
    full = (64 + CONTEXT_MIB) * MIB
    assert out["used"] == full and out["destroy"] == 0 and out["2d_fits"] == 0 and out["after"] == full
