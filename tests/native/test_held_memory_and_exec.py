"""Memory the driver still holds stays charged; a program started by exec inherits
no charge.

The driver frees a cuMemCreate allocation only once its handle is released and its
last mapping is gone: the mock does so (the card refuses meanwhile), and the shim
charges the share until then.  A process that execs another program (the same pid)
leaves nothing charged, as the kernel drops the ledger's locks with the old program;
nor does a new process that is given a dead one's pid.  Each fault that breaks one of
these is shown to break exactly it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import CONTEXT_MIB, run, tool

OOM = "CUDA_ERROR_OUT_OF_MEMORY"
SHARE = 4096  # seed_env: 4 GiB on each card
TOLD = SHARE - CONTEXT_MIB  # what a process holding a context is told is free
STAGES = ("mapped twice, handle released", "mapped once, handle released", "unmapped, handle released")
AFTER_EXEC = 'echo "pid $$ after exec"; exec "$@"'


def faulty(env: dict[str, str], fault: str) -> dict[str, str]:
    faults_lib = Path(env["LD_PRELOAD"]).with_name("libgpushare-shim-faults.so")
    return dict(env, GPUSHARE_SHIM_FAULT=fault, LD_PRELOAD=str(faults_lib))


def vmm_release(root: Path, env: dict[str, str], hold: int, ask: int) -> dict[str, str]:
    """Each try's answer ("granted" or the error), by stage."""
    done = run([tool(root, "gpushare-attack"), "vmm-release", "--hold-mib", str(hold), "--alloc-mib", str(ask)], env)
    assert done.stdout.startswith("holding "), done.stdout + done.stderr
    said = {}
    for line in done.stdout.splitlines()[1:]:
        stage, _, rest = line.partition(": alloc ")
        said[stage] = "granted" if rest.endswith("granted") else rest.rpartition("failed: ")[2]
    assert list(said) == list(STAGES), done.stdout
    return said


def exec_holding(root: Path, env: dict[str, str], mib: int, *wrap: str) -> subprocess.CompletedProcess[str]:
    argv = [tool(root, "gpushare-attack"), "exec", "--alloc-mib", str(mib), "--", "sh", "-c", AFTER_EXEC, "sh"]
    return run([*wrap, *argv, tool(root, "gpushare-probe"), "--device", "0", "--alloc-mib", str(mib)], env)


def test_the_mock_driver_frees_mapped_memory_only_at_the_last_unmap(bare_env, native_root):
    """Without a share, the card itself: 10000 MiB mapped of a 16160 MiB card leave no
    room for 8000 MiB until both mappings are gone, though the handle was released."""
    said = vmm_release(native_root, bare_env, 10000, 8000)
    assert said == dict(zip(STAGES, (OOM, OOM, "granted"))), said


def test_the_share_holds_mapped_memory_until_the_last_unmap(seed_env, native_root):
    hold = TOLD * 2 // 3 // 2 * 2
    said = vmm_release(native_root, seed_env, hold, TOLD - hold // 2)
    assert said == dict(zip(STAGES, (OOM, OOM, "granted"))), said


def test_fault_vmm_release_frees_gives_the_share_back_while_mapped(seed_env, native_root):
    hold = TOLD * 2 // 3 // 2 * 2
    said = vmm_release(native_root, faulty(seed_env, "vmm-release-frees"), hold, TOLD - hold // 2)
    assert said[STAGES[0]] == "granted" and said[STAGES[2]] == "granted", said


def test_exec_leaves_the_new_program_the_whole_share(seed_env, native_root):
    done = exec_holding(native_root, seed_env, TOLD)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    pid = lines[0].split()[1]
    assert lines[1] == f"pid {pid} after exec", lines
    assert lines[2].startswith(f"allocated 1 x {TOLD} MiB on device 0"), lines


def test_fault_exec_keeps_charge_refuses_the_new_program(seed_env, native_root):
    done = exec_holding(native_root, faulty(seed_env, "exec-keeps-charge"), TOLD)
    assert done.returncode == 2 and OOM in done.stdout, done.stdout + done.stderr
    assert "FAULT INJECTED: GPUSHARE_SHIM_FAULT=exec-keeps-charge" in done.stderr


def test_the_child_of_a_holder_that_execs_still_shares_its_budget(seed_env, native_root):
    """fork then exec: the parent still holds, so the child's program is refused."""
    probe = tool(native_root, "gpushare-probe")
    done = run(
        [
            probe,
            "--device",
            "0",
            "--alloc-mib",
            str(TOLD),
            "--then-exec",
            probe,
            "--device",
            "0",
            "--alloc-mib",
            str(TOLD),
        ],
        seed_env,
    )
    assert done.returncode == 2 and OOM in done.stdout, done.stdout + done.stderr


def test_a_reused_pid_starts_with_nothing_charged(seed_env, native_root):
    """A holder of the whole share is killed and a new process is given its pid (in
    the workload's own user and PID namespaces): it can take the whole share."""
    probe = [tool(native_root, "gpushare-probe"), "--device", "0", "--alloc-mib", str(TOLD)]
    argv = [tool(native_root, "gpushare-attack"), "pid-reuse", "--alloc-mib", str(TOLD), "--", *probe]
    done = run(argv, seed_env)
    if "pids not cycled" in done.stdout:
        pytest.skip(done.stdout.strip())
    assert done.returncode == 0, done.stdout + done.stderr
    holder = done.stdout.split("holder pid ")[1].split()[0]
    assert f"pid {holder} reused" in done.stdout, done.stdout
    assert f"allocated 1 x {TOLD} MiB on device 0" in done.stdout, done.stdout


# Where the pod may make no user namespace (here: none allowed inside one of its own),
# the pids are cycled until the holder's comes round.
NO_USER_NAMESPACES = 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"'


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare(1)")
def test_a_pid_reused_by_cycling_starts_with_nothing_charged(seed_env, native_root):
    probe = [tool(native_root, "gpushare-probe"), "--device", "0", "--alloc-mib", str(TOLD)]
    attack = [tool(native_root, "gpushare-attack"), "pid-reuse", "--alloc-mib", str(TOLD), "--", *probe]
    done = run(["unshare", "-Ur", "sh", "-c", NO_USER_NAMESPACES, "sh", *attack], seed_env, timeout=120)
    if done.returncode != 0 and "cycling the pids" not in done.stdout:
        pytest.skip(f"no user namespace to forbid them in: {done.stdout + done.stderr}")
    if "pids not cycled" in done.stdout:
        pytest.skip(done.stdout.strip())
    assert done.returncode == 0, done.stdout + done.stderr
    holder = done.stdout.split("holder pid ")[1].split()[0]
    assert f"pid {holder} reused (after" in done.stdout, done.stdout
    assert f"allocated 1 x {TOLD} MiB on device 0" in done.stdout, done.stdout
