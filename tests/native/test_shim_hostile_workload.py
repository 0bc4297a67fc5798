"""The shim against a workload that tries to lift its own share (docs/threat-model.md).

The device plugin mounts the container's limits read-only at /etc/gpushare/limits;
each test here gives a process that file in a private mount namespace (a tmpfs over
/etc/gpushare, as the container's mount would be) and then lets it do what a hostile
workload can: clear or raise its limit variables, switch on a fault, point the
accounting file at a link, rewrite it, drop locks on it.
"""

from __future__ import annotations

import os
import select
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import run, tool
from gpushare_stack.deviceplugin.container_files import prepared_usage_file

OOM = "CUDA_ERROR_OUT_OF_MEMORY"
SHARE = 4096  # seed_env: 4 GiB on each card
LIMIT_VARS = ("GPUSHARE_MEMORY_LIMIT", "GPUSHARE_MEMORY_LIMIT_0", "GPUSHARE_MEMORY_LIMIT_1", "GPUSHARE_USAGE_FILE")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a private mount namespace needs root")


def limits_text(usage: Path, cards: tuple[int, ...] = (0, 1), mib: int = SHARE) -> str:
    lines = [f"GPUSHARE_MEMORY_LIMIT_{i}={mib}MiB" for i in cards]
    return "\n".join(["# written by the device plugin", *lines, f"GPUSHARE_USAGE_FILE={usage}", ""])


def in_container(limits: str, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run argv with ``limits`` at /etc/gpushare/limits, in a private mount namespace."""
    script = (
        'mount -t tmpfs -o size=1m gpushare-test /etc/gpushare && cat > /etc/gpushare/limits && exec "$@" < /dev/null'
    )
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", *argv],
        env=env,
        input=limits,
        capture_output=True,
        text=True,
        timeout=60,
    )


def probe(root: Path, *args: str) -> list[str]:
    return [tool(root, "gpushare-probe"), *args]


def hostile(env: dict[str, str], **changes: str | None) -> dict[str, str]:
    out = dict(env)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


@pytest.fixture
def usage(tmp_path: Path) -> Path:
    """The accounting file as the device plugin makes it."""
    path = tmp_path / "run" / "usage"
    path.parent.mkdir()
    path.write_bytes(prepared_usage_file())
    return path


@pytest.mark.parametrize(
    "attempt",
    ["limits unset", "limits raised", "fault switched on", "own usage file"],
)
def test_the_environment_cannot_lift_the_limits_the_file_gives(seed_env, native_root, usage, tmp_path, attempt):
    env = {
        "limits unset": hostile(seed_env, **dict.fromkeys(LIMIT_VARS)),
        "limits raised": hostile(seed_env, GPUSHARE_MEMORY_LIMIT_0="64GiB", GPUSHARE_MEMORY_LIMIT="64GiB"),
        "fault switched on": hostile(seed_env, GPUSHARE_SHIM_FAULT="per-process-budget,unguarded-managed"),
        "own usage file": hostile(seed_env, GPUSHARE_USAGE_FILE=str(tmp_path / "mine")),
    }[attempt]
    past = in_container(limits_text(usage), probe(native_root, "--device", "0", "--alloc-mib", "4097"), env)
    assert past.returncode != 0 and OOM in past.stdout + past.stderr, past.stdout + past.stderr
    assert "FAULT INJECTED" not in past.stderr
    within = in_container(limits_text(usage), probe(native_root, "--device", "0", "--alloc-mib", "3072"), env)
    assert within.returncode == 0, within.stdout + within.stderr
    assert not (tmp_path / "mine").exists()  # the shim took the plugin's file, not the environment's
    assert not (tmp_path / "mine").exists()  # the file's accounting, not the workload's


def test_a_card_the_limits_file_gives_no_limit_is_refused_not_unlimited(seed_env, native_root, usage):
    env = hostile(seed_env, **dict.fromkeys(LIMIT_VARS))
    only_card_0 = limits_text(usage, cards=(0,))
    card_1 = in_container(only_card_0, probe(native_root, "--device", "1", "--alloc-mib", "1"), env)
    assert card_1.returncode != 0 and OOM in card_1.stdout + card_1.stderr, card_1.stdout + card_1.stderr
    card_0 = in_container(only_card_0, probe(native_root, "--device", "0", "--alloc-mib", "1024"), env)
    assert card_0.returncode == 0, card_0.stdout + card_0.stderr


def test_a_limits_file_that_limits_nothing_refuses_every_call(seed_env, native_root, usage):
    done = in_container("# nothing\n", probe(native_root, "--device", "0", "--alloc-mib", "1"), seed_env)
    assert done.returncode != 0
    assert "gpushare-shim: limits file /etc/gpushare/limits gives no limit" in done.stderr, done.stderr


def test_the_usage_file_is_private_and_never_opened_through_a_link(seed_env, native_root, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("another file\n")
    victim.chmod(0o644)
    link = tmp_path / "link"
    link.symlink_to(victim)
    env = hostile(seed_env, GPUSHARE_USAGE_FILE=str(link))
    done = run(probe(native_root, "--device", "0", "--alloc-mib", "64"), env)
    assert done.returncode != 0, done.stdout  # no accounting, no allocation (fail closed)
    assert "cannot open" in done.stderr, done.stderr
    assert victim.read_text() == "another file\n" and (victim.stat().st_mode & 0o777) == 0o644
    private = tmp_path / "private"
    ok = run(
        probe(native_root, "--device", "0", "--alloc-mib", "64"), hostile(seed_env, GPUSHARE_USAGE_FILE=str(private))
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert (private.stat().st_mode & 0o777) == 0o600


def hold(env: dict[str, str], root: Path, mib: int, *prefix: str) -> subprocess.Popen[str]:
    """A process holding mib on card 0 (started with prefix, e.g. in a PID namespace of its own)."""
    holder = subprocess.Popen(
        [*prefix, *probe(root, "--device", "0", "--alloc-mib", str(mib), "--hold-seconds", "60")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert "allocated" in holder.stdout.readline()
    return holder


def unlock_everything(usage: Path) -> None:
    """What a process of the container can do to the ledger's locks: drop every lock it
    could own, through its own open file description and as a process."""
    import fcntl

    with open(usage, "r+b") as f:
        fcntl.lockf(f, fcntl.LOCK_UN, 0, 0)
        whole = struct.pack("hhqqi", fcntl.F_UNLCK, os.SEEK_SET, 0, 0, 0)
        fcntl.fcntl(f, 38, whole)  # F_OFD_SETLK


FORGERIES = {
    "zeroed": lambda usage: usage.write_bytes(bytes(len(usage.read_bytes()) or 4096)),
    "emptied": lambda usage: usage.write_bytes(b""),
    "random bytes": lambda usage: usage.write_bytes(os.urandom(1 << 20)),
    "locks dropped by another process": unlock_everything,
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_what_a_process_writes_to_the_accounting_file_makes_no_room(seed_env, native_root, usage, forgery):
    """The accounting is the holders' locks, not the file's bytes: whatever another
    process of the container writes, the holder's 3072 MiB stay counted."""
    env = dict(seed_env, GPUSHARE_USAGE_FILE=str(usage))
    holder = hold(env, native_root, 3072)
    try:
        FORGERIES[forgery](usage)
        over = run(probe(native_root, "--device", "0", "--alloc-mib", "2048"), env)
        rest = run(probe(native_root, "--device", "0", "--alloc-mib", "256"), env)  # two contexts aside
    finally:
        holder.terminate()
        holder.wait(10)
    assert over.returncode != 0 and OOM in over.stdout + over.stderr, (
        f"{forgery}: with 3072 MiB held, 2048 MiB more was granted on a {SHARE} MiB share: {over.stdout}"
    )
    assert rest.returncode == 0, f"{forgery}: the rest of the share: {rest.stdout + rest.stderr}"


def test_a_holder_in_another_pid_namespace_is_counted_and_comes_back_when_killed(seed_env, native_root, usage):
    """No pid is read: a process in a PID namespace of its own counts like any other,
    and what it held comes back once it is killed."""
    env = dict(seed_env, GPUSHARE_USAGE_FILE=str(usage))
    holder = hold(env, native_root, 3072, "unshare", "-p", "-f", "--kill-child", "--mount-proc")
    try:
        over = run(probe(native_root, "--device", "0", "--alloc-mib", "2048"), env)
    finally:
        holder.kill()
        holder.wait(10)
        # unshare's child, the holder in the namespace, dies of its parent's death a moment
        # later (on a busy machine after the next probe had started); its end of the pipe,
        # like its locks, goes when it is gone.
        assert select.select([holder.stdout], [], [], 10)[0], "the holder in the PID namespace outlived unshare by 10 s"
        holder.stdout.read()
    assert over.returncode != 0 and OOM in over.stdout + over.stderr, over.stdout
    after = run(probe(native_root, "--device", "0", "--alloc-mib", "3584"), env)
    assert after.returncode == 0, after.stdout + after.stderr


def test_an_accounting_file_removed_refuses_allocations(seed_env, native_root, usage):
    """A new count would forget what live processes hold: with the plugin's file gone,
    the shim refuses (fail closed) rather than start one."""
    limits = limits_text(usage)
    first = in_container(limits, probe(native_root, "--device", "0", "--alloc-mib", "1024"), seed_env)
    assert first.returncode == 0, first.stdout + first.stderr
    usage.unlink()
    after = in_container(limits, probe(native_root, "--device", "0", "--alloc-mib", "64"), seed_env)
    assert after.returncode != 0 and OOM in after.stdout + after.stderr, after.stdout + after.stderr
    assert "gpushare-shim: usage file" in after.stderr, after.stderr
