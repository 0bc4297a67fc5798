"""The mock CUDA records, per physical card, which processes hold how much device
memory (the node's process table, read by NVML and nvidia-smi); a process killed with
SIGKILL drops out without anyone cleaning up after it."""

from __future__ import annotations

import json
import signal
import subprocess
import time

from conftest import PYTHON, run, tool

LIST = r"""
import json, pynvml
pynvml.nvmlInit()
out = {}
for i in range(pynvml.nvmlDeviceGetCount()):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    out[pynvml.nvmlDeviceGetMinorNumber(h)] = {p.pid: p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)}
print(json.dumps(out))
"""


def listing(env) -> dict[str, dict[str, int]]:
    proc = run([PYTHON, "-c", LIST], env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_holder_is_listed_on_its_physical_card_and_dropped_after_sigkill(bare_env, native_root, tmp_path):
    env = dict(bare_env, GPUSHARE_MOCK_STATE_DIR=str(tmp_path / "state"))
    holder = subprocess.Popen(
        [
            tool(native_root, "gpushare-probe"),
            "--device",
            "1",
            "--alloc-mib",
            "700",
            "--hold-seconds",
            "60",
            "--api",
            "pool",
        ],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert "allocated" in holder.stdout.readline()
        assert (tmp_path / "state" / "process-table").is_file()
        cards = listing(env)
        # container device 1 is physical card 2 (NVIDIA_VISIBLE_DEVICES=1,2)
        assert str(holder.pid) in cards["2"], cards
        assert cards["2"][str(holder.pid)] >= 700 << 20  # what it holds, the context reserve included
        assert str(holder.pid) not in cards["1"]
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        deadline = time.monotonic() + 5
        while str(holder.pid) in listing(env)["2"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert str(holder.pid) not in listing(env)["2"], "a killed process must drop out of the table"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_a_process_that_frees_everything_is_not_listed(bare_env, native_root, tmp_path):
    env = dict(bare_env, GPUSHARE_MOCK_STATE_DIR=str(tmp_path / "state"))
    script = r"""
import ctypes, json, sys
lib = ctypes.CDLL("libcuda.so.1")
lib.cuInit(0)
ctx = ctypes.c_void_p(); p = ctypes.c_uint64()
lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0); lib.cuCtxSetCurrent(ctx)
lib.cuMemAlloc_v2(ctypes.byref(p), 256 << 20)
print("held", flush=True); sys.stdin.readline()
lib.cuMemFree_v2(p); lib.cuDevicePrimaryCtxRelease_v2(0)
print("freed", flush=True); sys.stdin.readline()
"""
    p = subprocess.Popen([PYTHON, "-c", script], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        assert listing(env)["1"].get(str(p.pid)) == (256 + 304) << 20
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "freed"
        assert str(p.pid) not in listing(env)["1"]
    finally:
        p.kill()
        p.wait()
