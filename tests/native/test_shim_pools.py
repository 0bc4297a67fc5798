"""Memory pools under the shim: the share is charged for what a pool holds, not for
what it hands out, and the charge is brought back in line with the pool without a
driver query on every free (shim_pool.c).  A free leaves the charge as it was (never
less than the pool holds); the pool's next allocation, a trim, an attribute change,
cuMemGetInfo, or a reservation that finds the share full settle it again."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_shim_paths import Worker as PathsWorker

from conftest import CONTEXT_MIB, KEPT_MIB, SEED_INVENTORY
from gpushare_conformance import native
from gpushare_conformance.sandbox import sandbox_env

MIB = 1 << 20
ROOM_MIB = 64  # what the pools of the two workers may hold together
CONTEXTS_MIB = 2 * CONTEXT_MIB  # beside the two workers' primary contexts, charged to the share too
SHARE_MIB = ROOM_MIB + CONTEXTS_MIB
SLACK_MIB = SHARE_MIB / 64  # what a pool's charge may keep beyond its reserve after an allocation

# One process of the container, driven by JSON lines: allocations from a pool of its
# own ("pool") or from the device's current pool ("async"), stream-ordered frees,
# synchronisation, the pool's release threshold and trim, and the share's usage as
# cuMemGetInfo reports it (which settles this process's pools, none in a reader).
WORKER = r"""
import ctypes, json, sys
lib = ctypes.CDLL("libcuda.so.1")
U64 = ctypes.c_uint64
lib.cuInit(0)
ctx = ctypes.c_void_p()
assert lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0 and lib.cuCtxSetCurrent(ctx) == 0
print(json.dumps({"context": "held"}), flush=True)  # charged to the share from here on
class Loc(ctypes.Structure): _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]
class PoolProps(ctypes.Structure):
    _fields_ = [("allocType", ctypes.c_int), ("handleTypes", ctypes.c_int), ("location", Loc),
                ("win32", ctypes.c_void_p), ("maxSize", ctypes.c_size_t), ("usage", ctypes.c_ushort),
                ("reserved", ctypes.c_ubyte * 54)]
pool = ctypes.c_void_p()
assert lib.cuMemPoolCreate(ctypes.byref(pool), ctypes.byref(PoolProps(allocType=1, location=Loc(1, 0)))) == 0
RELEASE_THRESHOLD, RESERVED_MEM_CURRENT = 4, 5
for line in sys.stdin:
    cmd = json.loads(line)
    if cmd[0] == "alloc":
        p = U64()
        if cmd[1] == "pool": rc = lib.cuMemAllocFromPoolAsync(ctypes.byref(p), ctypes.c_size_t(cmd[2]), pool, None)
        else: rc = lib.cuMemAllocAsync(ctypes.byref(p), ctypes.c_size_t(cmd[2]), None)
        out = {"rc": rc, "ptr": p.value}
    elif cmd[0] == "free": out = {"rc": lib.cuMemFreeAsync(U64(cmd[1]), None)}
    elif cmd[0] == "sync": out = {"rc": lib.cuStreamSynchronize(None)}
    elif cmd[0] == "threshold":
        v = U64(cmd[1])
        out = {"rc": lib.cuMemPoolSetAttribute(pool, RELEASE_THRESHOLD, ctypes.byref(v))}
    elif cmd[0] == "trim": out = {"rc": lib.cuMemPoolTrimTo(pool, ctypes.c_size_t(cmd[1]))}
    elif cmd[0] == "destroy": out = {"rc": lib.cuMemPoolDestroy(pool)}
    elif cmd[0] == "reserved":  # what the pool, and the device's current pool, hold
        current, v, w = ctypes.c_void_p(), U64(), U64()
        assert lib.cuDeviceGetMemPool(ctypes.byref(current), 0) == 0
        assert lib.cuMemPoolGetAttribute(pool, RESERVED_MEM_CURRENT, ctypes.byref(v)) == 0
        assert lib.cuMemPoolGetAttribute(current, RESERVED_MEM_CURRENT, ctypes.byref(w)) == 0
        out = {"reserved": v.value, "current": w.value}
    else:
        f, t = ctypes.c_size_t(), ctypes.c_size_t()
        assert lib.cuMemGetInfo_v2(ctypes.byref(f), ctypes.byref(t)) == 0
        out = {"used": t.value - f.value}
    print(json.dumps(out), flush=True)
"""


class Worker(PathsWorker):
    """A worker process of this file's script (the same line protocol as test_shim_paths')."""

    def alloc(self, path: str, mib: int) -> tuple[int, int]:
        r = self.ask("alloc", path, mib * MIB)
        return r["rc"], r["ptr"]

    def used_mib(self) -> float:
        """What the share is charged for, the two workers' contexts left out."""
        return self.ask("used")["used"] / MIB - CONTEXTS_MIB


def workers(tmp: Path, n: int) -> list[Worker]:
    inv = tmp / "inventory.yaml"
    inv.write_text(SEED_INVENTORY)
    env = sandbox_env(
        inv, [1, 2], SHARE_MIB, base_env=os.environ, usage_file=tmp / "usage", native_root=native.native_dir()
    )
    script = tmp / "worker.py"
    script.write_text(WORKER)
    return [Worker(env, script) for _ in range(n)]


def test_pool_holding_more_than_it_hands_out_stays_charged_until_trimmed(native_root, tmp_path):
    holder, reader = workers(tmp_path, 2)
    try:
        assert holder.ask("threshold", 32 * MIB)["rc"] == 0  # the pool keeps up to 32 MiB it no longer hands out
        rc, p = holder.alloc("pool", 32)
        assert rc == 0 and holder.ask("free", p)["rc"] == 0 and holder.ask("sync")["rc"] == 0
        assert holder.ask("reserved")["reserved"] == 32 * MIB
        assert holder.used_mib() == reader.used_mib() == 32, "what the pool holds unused is charged"
        assert reader.alloc("pool", 48)[0] == 2, "nor can another process take it: CUDA_ERROR_OUT_OF_MEMORY"
        rc, p = holder.alloc("pool", 8)  # served from what the pool holds
        assert rc == 0 and holder.ask("reserved")["reserved"] == 32 * MIB
        assert 32 <= reader.used_mib() <= 32 + SLACK_MIB, "charged for all the pool holds, not the 8 MiB handed out"
        assert holder.ask("free", p)["rc"] == 0
        rc, p = holder.alloc("pool", 32)  # fits in what the pool holds, although the share looks full
        assert rc == 0 and holder.ask("free", p)["rc"] == 0
        assert holder.ask("trim", 0)["rc"] == 0 and holder.ask("reserved")["reserved"] == 0
        assert 0 <= reader.used_mib() <= KEPT_MIB, (
            "a trim gives back what the pool let go, seen by other processes at once"
        )
        rc, p = reader.alloc("pool", 48)
        assert rc == 0 and reader.ask("free", p)["rc"] == 0
    finally:
        holder.close()
        reader.close()


def test_a_pool_destroyed_with_an_allocation_out_keeps_it_charged(native_root, tmp_path):
    """The driver keeps a destroyed pool's memory while an allocation from it is out:
    so does the share (the process let go of the pool, not of the memory)."""
    holder, reader = workers(tmp_path, 2)
    try:
        rc, p = holder.alloc("pool", 32)
        assert rc == 0 and holder.ask("destroy")["rc"] == 0
        assert reader.used_mib() >= 32, "the allocation still out stays charged"
        assert reader.alloc("pool", 48)[0] == 2, "past what is left: CUDA_ERROR_OUT_OF_MEMORY"
        assert reader.alloc("pool", 16)[0] == 0, "what is left is still there"
    finally:
        holder.close()
        reader.close()


def test_charge_left_by_a_free_is_settled_at_the_next_allocation(native_root, tmp_path):
    for path in ("pool", "async"):
        (tmp_path / path).mkdir()
        holder, reader = workers(tmp_path / path, 2)
        try:
            rc, p = holder.alloc(path, 48)
            assert rc == 0 and holder.ask("free", p)["rc"] == 0 and holder.ask("sync")["rc"] == 0
            # The free asked the driver nothing: the charge may still stand (never less than the pool holds).
            assert 0 <= reader.used_mib() <= 48
            rc, p = holder.alloc(path, 48)  # the charge left over never refuses its own process
            assert rc == 0 and holder.ask("free", p)["rc"] == 0 and holder.ask("sync")["rc"] == 0
            rc, small = holder.alloc(path, 8)
            assert rc == 0
            # The allocation settled the charge on the pool's reserve (8 MiB), keeping at
            # most 1/64 of the share beyond it.
            assert 8 <= reader.used_mib() <= 8 + SLACK_MIB + KEPT_MIB, "the stale charge was given back"
            assert reader.alloc(path, 48)[0] == 0, "another process has the rest of the share"
            assert holder.alloc(path, 16)[0] == 2, "past the share: CUDA_ERROR_OUT_OF_MEMORY"
            assert holder.ask("free", small)["rc"] == 0
        finally:
            holder.close()
            reader.close()


def pools_hold(ws: list[Worker]) -> int:
    """What the pools of all the workers hold (each its own pool and its device's current pool)."""
    total = 0
    for w in ws:
        r = w.ask("reserved")
        total += r["reserved"] + r["current"]
    return total


op = st.one_of(
    st.tuples(
        st.just("alloc"), st.integers(0, 1), st.sampled_from(["pool", "async"]), st.integers(1, 16).map(lambda k: 2 * k)
    ),
    st.tuples(st.just("free"), st.integers(0, 1), st.integers(0, 1000)),
    st.tuples(st.just("sync"), st.integers(0, 1)),
    st.tuples(st.just("threshold"), st.integers(0, 1), st.sampled_from([0, 16 * MIB])),
    st.tuples(st.just("trim"), st.integers(0, 1)),
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=30))
def test_two_processes_on_pools_never_exceed_the_share_without_settling(ops):
    """No cuMemGetInfo between the steps (it would settle the charge): whatever the
    frees left charged, what succeeds never takes the pools past the share, and once
    both processes settle the figure is what the pools hold."""
    with tempfile.TemporaryDirectory(prefix="gpushare-pools-") as tmp:
        ws = workers(Path(tmp), 2)
        live: list[dict[int, int]] = [{}, {}]
        try:
            for o in ops:
                w = ws[o[1]]
                if o[0] == "alloc":
                    rc, p = w.alloc(o[2], o[3])
                    if rc == 0:
                        live[o[1]][p] = o[3]
                    else:
                        assert rc == 2, o
                    held = pools_hold(ws)
                    assert held <= ROOM_MIB * MIB, f"the pools hold {held / MIB} MiB, past the share, after {o}"
                elif o[0] == "free" and live[o[1]]:
                    p = sorted(live[o[1]])[o[2] % len(live[o[1]])]
                    assert w.ask("free", p)["rc"] == 0
                    del live[o[1]][p]
                elif o[0] == "sync":
                    assert w.ask("sync")["rc"] == 0
                elif o[0] == "threshold":
                    assert w.ask("threshold", o[2])["rc"] == 0
                elif o[0] == "trim":
                    assert w.ask("trim", 0)["rc"] == 0
            for w in ws:
                w.used_mib()  # each process settles its own pools
            held = pools_hold(ws)  # each sees what the other keeps of what it freed too
            for w in ws:
                assert held <= w.used_mib() * MIB <= held + KEPT_MIB * MIB
        finally:
            for w in ws:
                w.close()
