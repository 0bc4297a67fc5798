"""Racing processes and threads never together exceed the share, and leave nothing behind.

Each worker process (and each of its threads) allocates and frees random sizes through
the shim as fast as it can.  Alongside, the workers keep a ground-truth total in a
shared file under a lock: a block is added only after cuMemAlloc succeeded and taken
off before cuMemFree, so the ground truth is never more than what the shim has
reserved.  Each worker's primary context, which the shim charges to the share too
(conftest.CONTEXT_MIB), is in the ground truth from its retain to its release.  If
the shim ever let the container over-commit, its peak would pass the share.
"""

from __future__ import annotations

import struct
import subprocess

import pytest

from conftest import CONTEXT_MIB, PYTHON, run, tool

ROOM_MIB = 64  # what the workers fight over, beside their contexts

WORKER = r"""
import ctypes, fcntl, mmap, random, struct, sys, threading, time
truth_path, threads, ops, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
processes, context = int(sys.argv[5]), int(sys.argv[6])
cuda = ctypes.CDLL("libcuda.so.1")
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
alloc, release = cuda.cuMemAlloc_v2, cuda.cuMemFree_v2
alloc.argtypes, release.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t], [ctypes.c_uint64]
f = open(truth_path, "r+b")
m = mmap.mmap(f.fileno(), 24)  # current, peak, workers holding their context
local = threading.Lock()  # flock does not exclude threads sharing the file

def account(delta, ready=0):
    with local:
        fcntl.flock(f, fcntl.LOCK_EX)
        cur, peak, n = struct.unpack_from("qqq", m)
        cur += delta
        struct.pack_into("qqq", m, 0, cur, max(peak, cur), n + ready)
        fcntl.flock(f, fcntl.LOCK_UN)

# The context is charged at the retain: counted after it, as a block after its allocation.
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
account(context, ready=1)
deadline = time.monotonic() + 60
while struct.unpack_from("qqq", m)[2] < processes:  # every context in before the race
    assert time.monotonic() < deadline, "the other workers never got their context"
    time.sleep(0.005)

counts = {"ok": 0, "oom": 0}
errors = []

def work(k):
    assert cuda.cuCtxSetCurrent(ctx) == 0
    rnd, held = random.Random(seed * 100 + k), []
    for _ in range(ops):
        if held and rnd.random() < 0.5:
            p, size = held.pop(rnd.randrange(len(held)))
            account(-size)
            rc = release(p)
            if rc != 0:
                errors.append(f"cuMemFree -> {rc}")
        else:
            size = rnd.randint(1, 24 << 20)
            p = ctypes.c_uint64()
            rc = alloc(ctypes.byref(p), size)
            if rc == 0:
                account(size)
                held.append((p.value, size))
                counts["ok"] += 1
            elif rc == 2:  # CUDA_ERROR_OUT_OF_MEMORY
                counts["oom"] += 1
            else:
                errors.append(f"cuMemAlloc -> {rc}")
    for p, size in held:
        account(-size)
        release(p)

ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
account(-context)  # taken off before the release, as a block before its free
if cuda.cuDevicePrimaryCtxRelease(dev) != 0:
    errors.append("cuDevicePrimaryCtxRelease failed")
print(counts["ok"], counts["oom"], ";".join(errors[:5]))
"""


@pytest.mark.parametrize(
    ("visible", "processes", "threads"),
    [
        ("0", 4, 1),  # one CUDA device, single-threaded processes: the lock-free fast path
        ("0", 3, 3),  # one device, threaded processes
        (None, 3, 3),  # two devices: the card is asked of the driver on every call
    ],
)
def test_racing_allocations_never_exceed_the_share(seed_env, native_root, tmp_path, visible, processes, threads):
    share_mib = ROOM_MIB + processes * CONTEXT_MIB
    env = dict(seed_env, GPUSHARE_MEMORY_LIMIT_0=f"{share_mib}MiB")
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    truth = tmp_path / "truth"
    truth.write_bytes(bytes(24))
    procs = [
        subprocess.Popen(
            [PYTHON, "-c", WORKER, str(truth), str(threads), "1500", str(i), str(processes), str(CONTEXT_MIB << 20)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    ok = oom = 0
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        fields = out.split(" ", 2)
        assert fields[2].strip() == "", fields[2]
        ok, oom = ok + int(fields[0]), oom + int(fields[1])
    current, peak, ready = struct.unpack("qqq", truth.read_bytes())
    assert current == 0 and ready == processes
    assert peak <= share_mib << 20, f"the container held {peak} bytes at once, over its {share_mib} MiB share"
    assert ok > 100 and oom > 100, (ok, oom)  # the share was really fought over
    used = run([tool(native_root, "nvidia-smi"), "--query-gpu=memory.used", "--format=csv,noheader,nounits"], env)
    assert used.stdout.splitlines() == ["0", "0"], used.stdout + used.stderr
