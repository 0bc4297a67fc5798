"""One budget per container, memory that comes back, and the shim faults that break them.

The probe's ``--cycles`` (allocate and free in one process, many times) and
``--then-exec`` (run a child while holding) drive the sound shim, then the shim with
``GPUSHARE_SHIM_FAULT`` set as the device plugin sets it under ``--fault``: each fault
must break exactly the property the conformance checks read.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import CONTEXT_MIB, run, tool
from gpushare_conformance.sandbox import sandbox_env

OOM = "CUDA_ERROR_OUT_OF_MEMORY"
SHARE = 4096  # seed_env: 4 GiB on each card
WHOLE = SHARE - CONTEXT_MIB  # all one process may allocate on a card beside its context


def probe(root, *args: str) -> list[str]:
    return [tool(root, "gpushare-probe"), *args]


def hold(env, root, mib: int, seconds: int = 60) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        probe(root, "--device", "0", "--alloc-mib", str(mib), "--hold-seconds", str(seconds)),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = p.stdout.readline()
    assert "allocated" in line, line
    return p


def faulty(env: dict[str, str], fault: str) -> dict[str, str]:
    """The fault build of the shim with ``fault`` on (the shipped one has no switch)."""
    faults_lib = Path(env["LD_PRELOAD"]).with_name("libgpushare-shim-faults.so")
    return dict(env, GPUSHARE_SHIM_FAULT=fault, LD_PRELOAD=str(faults_lib))


def test_the_shipped_shim_has_no_fault_switch(seed_env, native_root):
    """A workload setting GPUSHARE_SHIM_FAULT itself gets nothing from it: each process
    still shares the one budget (the fault per-process-budget would give each its own)."""
    env = dict(seed_env, GPUSHARE_SHIM_FAULT="per-process-budget")
    holder = hold(env, native_root, SHARE // 2)
    try:
        over = run(probe(native_root, "--device", "0", "--alloc-mib", str(SHARE // 2 + 64)), env)
    finally:
        holder.terminate()
        holder.wait(10)
    assert over.returncode != 0 and "CUDA_ERROR_OUT_OF_MEMORY" in over.stdout + over.stderr, over.stdout
    assert "FAULT INJECTED" not in over.stderr


def test_cycles_allocate_the_whole_share_again_and_again(seed_env, native_root):
    done = run(probe(native_root, "--device", "0", "--alloc-mib", str(WHOLE), "--cycles", "20"), seed_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"allocated and freed 1 x {WHOLE} MiB on device 0 19 times" in done.stdout


@pytest.mark.parametrize("cards", [[1, 2], [1]], ids=["two-cards", "one-card-fast-path"])
def test_leak_frees_fails_the_second_cycle_naming_it(seed_inventory, native_root, tmp_path, cards):
    env = faulty(
        sandbox_env(
            seed_inventory, cards, SHARE, base_env=os.environ, usage_file=tmp_path / "usage", native_root=native_root
        ),
        "leak-frees",
    )
    done = run(probe(native_root, "--device", "0", "--alloc-mib", str(WHOLE), "--cycles", "20"), env)
    assert done.returncode == 2 and OOM in done.stdout and "cycle 2 of 20" in done.stdout, done.stdout
    assert "FAULT INJECTED: GPUSHARE_SHIM_FAULT=leak-frees" in done.stderr


def test_child_of_a_holder_sees_the_same_share_and_budget(seed_env, native_root):
    held = 3000
    raw = run(
        probe(
            native_root,
            "--device",
            "0",
            "--alloc-mib",
            str(held),
            "--then-exec",
            tool(native_root, "gpushare-probe"),
            "--raw",
        ),
        seed_env,
    )
    assert raw.returncode == 0, raw.stdout + raw.stderr
    first = raw.stdout.splitlines()[1]  # after the holder's "allocated" line
    left = SHARE - held - 2 * CONTEXT_MIB  # the holder's context and the child's
    assert f"total_bytes={SHARE << 20}" in first and f"free_bytes={left << 20}" in first, raw.stdout
    over = run(
        probe(
            native_root,
            "--device",
            "0",
            "--alloc-mib",
            str(held),
            "--then-exec",
            tool(native_root, "gpushare-probe"),
            "--device",
            "0",
            "--alloc-mib",
            str(left + 1),
        ),
        seed_env,
    )
    assert over.returncode == 2 and OOM in over.stdout and "exited 2" in over.stdout, over.stdout


def test_per_process_budget_lets_a_second_process_past_the_container_share(seed_env, native_root):
    ask = ["--device", "0", "--alloc-mib", str(SHARE - 3000 - 2 * CONTEXT_MIB + 1)]  # each pays its context
    holder = hold(seed_env, native_root, 3000)
    try:
        assert run(probe(native_root, *ask), seed_env).returncode == 2
    finally:
        holder.kill()
        holder.wait()
    env = faulty(seed_env, "per-process-budget")
    holder = hold(env, native_root, 3000)
    try:
        broken = run(probe(native_root, *ask), env)
        assert broken.returncode == 0, broken.stdout
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize(("fault", "reclaimed"), [(None, True), ("no-reclaim", False)])
def test_no_reclaim_keeps_a_sigkilled_holders_memory(seed_env, native_root, fault, reclaimed):
    env = faulty(seed_env, fault) if fault else seed_env
    victim = hold(env, native_root, WHOLE)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    after = run(probe(native_root, "--device", "0", "--alloc-mib", str(WHOLE)), env)
    assert (after.returncode == 0) is reclaimed, after.stdout


def test_unknown_fault_is_refused_not_ignored(seed_env, native_root):
    done = run(probe(native_root, "--device", "0", "--alloc-mib", "1"), faulty(seed_env, "everything"))
    assert done.returncode != 0
    assert re.search(r"invalid GPUSHARE_SHIM_FAULT='everything'", done.stderr), done.stderr


def test_unguarded_managed_lets_only_that_path_past_the_share(seed_env, native_root):
    env = faulty(seed_env, "unguarded-managed")
    for api, held in (("alloc", False), ("managed", True), ("pool", False)):
        past = run(probe(native_root, "--device", "0", "--alloc-mib", str(SHARE + 1), "--api", api), env)
        assert (past.returncode == 0) is held, (api, past.stdout)
        sound = run(probe(native_root, "--device", "0", "--alloc-mib", str(SHARE + 1), "--api", api), seed_env)
        assert sound.returncode == 2 and f"--api {api}" in sound.stdout, sound.stdout
