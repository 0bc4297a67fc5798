"""The hostile workload's loader and stream tricks against the shims, in the sandbox.

Each trick (native/src/attack/attack.c) finds the driver's entry points in a way that
steps around an isolation library that does not hold the loader, then asks past the
share. The reference shim holds every trick an interposition library can hold; the
hami-like build, which holds dlsym only as HAMi-core does, is the control that shows
each trick is real. Reading libcuda's own symbol table is beyond any interposition
library (docs/threat-model.md): the test states that it gets through.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hamilike_shim import hami_env  # noqa: F401  (fixture)

from conftest import run, tool

SHARE_MIB = 4096
PAST = SHARE_MIB + 1
OOM = "CUDA_ERROR_OUT_OF_MEMORY"
HELD_TRICKS = ("deepbind", "dlmopen", "dlvsym", "preload")


def attack(env: dict[str, str], root: Path, *args: str) -> tuple[int, str]:
    lib_dir = str(root / "lib" / "attack")
    env = dict(env)
    if "preload" in args:
        # The workload's own preload goes first, before any isolation library.
        env["LD_PRELOAD"] = f"{lib_dir}/libgpushare-attack-dlsym.so:{env.get('LD_PRELOAD', '')}".rstrip(":")
    extra = ["--lib-dir", lib_dir] if args[0] == "loader" else []
    proc = run([tool(root, "gpushare-attack"), *args, *extra], env)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("trick", HELD_TRICKS)
def test_the_reference_shim_holds_the_loader_trick(seed_env, native_root, trick):
    rc, out = attack(seed_env, native_root, "loader", trick, "--device", "0", "--alloc-mib", str(PAST))
    assert rc == 2 and OOM in out, (trick, rc, out)
    rc, out = attack(seed_env, native_root, "loader", trick, "--device", "0", "--alloc-mib", "1024")
    assert rc == 0 and "granted 1024 MiB" in out, (trick, rc, out)


@pytest.mark.parametrize("trick", HELD_TRICKS)
def test_a_shim_that_holds_dlsym_only_lets_the_loader_trick_through(hami_env, native_root, trick):  # noqa: F811
    rc, out = attack(hami_env, native_root, "loader", trick, "--device", "0", "--alloc-mib", str(PAST))
    assert rc == 0 and f"granted {PAST} MiB" in out, (trick, rc, out)


def test_reading_the_drivers_symbol_table_is_beyond_an_interposition_library(seed_env, native_root):
    rc, out = attack(seed_env, native_root, "loader", "symtab", "--device", "0", "--alloc-mib", str(PAST))
    assert rc == 0 and f"granted {PAST} MiB" in out, (rc, out)


def test_a_stream_of_another_card_is_charged_to_that_card(seed_env, native_root):
    rc, out = attack(seed_env, native_root, "stream", "--device", "0", "--stream-device", "1", "--alloc-mib", "64")
    assert rc == 2 and OOM in out and "on a stream of device 1" in out, (rc, out)


def test_a_shim_that_charges_the_current_card_lets_the_stream_trick_through(hami_env, native_root):  # noqa: F811
    rc, out = attack(hami_env, native_root, "stream", "--device", "0", "--stream-device", "1", "--alloc-mib", "64")
    assert rc == 0 and "granted 64 MiB on a stream of device 1" in out, (rc, out)
