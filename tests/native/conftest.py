"""Fixtures for the native GPU layer: the build, the seed inventory, the sandbox env.

Every check runs the C code in a subprocess: the dynamic loader reads LD_LIBRARY_PATH
and LD_PRELOAD only when a process starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpushare_conformance import native
from gpushare_conformance.sandbox import sandbox_env

SEED_INVENTORY = """\
driver_version: "470.82.01"
cuda_version: "11.4"
gpus:
  - name: Tesla V100-SXM2-16GB
    memory_mib: 16160
    pci_bus_id: 00000000:00:08.0
  - name: Tesla V100-SXM2-16GB
    memory_mib: 16160
    pci_bus_id: 00000000:00:09.0
  - name: Tesla V100-SXM2-16GB   # the seed's second card
    memory_mib: 16160
    pci_bus_id: 00000000:00:0A.0
"""

PYTHON = sys.executable

# What the shim charges to a card's share for each process holding a CUDA context on
# that card (the first context of the process there; native/src/shim_ctx.c,
# SHIM_CONTEXT_CHARGE_MIB).  A context takes card memory that no allocation call asks
# for, so without the charge a container could pass its share by starting processes.
# The figure is the mock driver's own reserve per context (CONTEXT_RESERVE_BYTES in
# native/src/cuda_internal.h), about what the seed's page shows a context take (ACK:
# "totalMemory: 4.21GiB freeMemory: 3.91GiB").  So a process holding a context can
# allocate at most the share minus this, and cuMemGetInfo's free and nvidia-smi's used
# count it once per process holding a context.  The reference shim refuses a context
# the share cannot hold (CUDA_ERROR_OUT_OF_MEMORY); the hami-like build charges
# HAMi-core's own figure, even past the share (test_hamilike_shim.HAMI_CONTEXT_MIB).
# tests/gpu, which run on real drivers too, derive their figures from what cuMemGetInfo
# reports instead.
CONTEXT_MIB = 304
# What a process keeps of the memory it frees, at most (LEDGER_KEEP, native/src/shim_usage.h):
# the shim keeps up to a driver page locked for the next allocation, so another process
# may see that much more used (and be refused that much sooner) until it is reused or
# the process ends.
KEPT_MIB = 2


@pytest.fixture(scope="session")
def native_root() -> Path:
    return native.ensure_built()


@pytest.fixture
def seed_inventory(tmp_path: Path) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(SEED_INVENTORY)
    return path


@pytest.fixture
def seed_node(tmp_path: Path) -> dict[str, str]:
    """The environment of the seed's node: this test's own mock process table (the
    node-wide default, /run/gpushare-mock, is shared with every test the other workers
    run at once; ci78 saw three of their processes on the seed's cards)."""
    state = tmp_path / "mock-state"
    state.mkdir(exist_ok=True)
    return {**os.environ, "GPUSHARE_MOCK_STATE_DIR": str(state)}


@pytest.fixture
def seed_env(seed_inventory: Path, native_root: Path, tmp_path: Path, seed_node: dict[str, str]) -> dict[str, str]:
    """The seed's container: cards 1 and 2, 4 GiB each, shim on."""
    return sandbox_env(
        seed_inventory, [1, 2], 4096, base_env=seed_node, usage_file=tmp_path / "usage", native_root=native_root
    )


@pytest.fixture
def bare_env(seed_inventory: Path, native_root: Path, seed_node: dict[str, str]) -> dict[str, str]:
    """The same container without the shim (negative control), on the same node."""
    return sandbox_env(seed_inventory, [1, 2], 4096, isolation=False, base_env=seed_node, native_root=native_root)


def run(cmd: list[str], env: dict[str, str], timeout: float = 60, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kw)


def tool(root: Path, name: str) -> str:
    for sub in ("bin", "tests"):
        candidate = root / sub / name
        if candidate.exists():
            return str(candidate)
    raise FileNotFoundError(name)
