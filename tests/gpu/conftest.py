"""Real-GPU tests: the shim over the REAL NVIDIA libraries, no Kubernetes.

They need only `make -C native` and python3 with nvidia-ml-py, so they run on a bare
GPU machine:

    python3 -m pytest tests/gpu -p no:gpushare_conformance -v

Where no NVIDIA driver is installed they skip, saying what was looked for.
``GPUSHARE_GPU_DRIVER_DIR`` names a directory holding the driver's
``libnvidia-ml.so.1``/``libcuda.so.1`` (and ``nvidia-smi`` in ``../bin`` or beside),
for a driver outside the loader's path; tests/native points it at the mock driver to
show these tests pass over a driver that behaves like the real one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NATIVE = Path(os.environ.get("GPUSHARE_NATIVE_DIR", REPO / "native" / "build"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs an NVIDIA driver (real GPU hardware)")


@dataclass(frozen=True)
class Driver:
    """Where the driver's libraries and nvidia-smi are, and the environment to reach them."""

    lib_dir: Path | None  # None: the loader's default path finds them
    nvidia_smi: str
    env: dict[str, str]


def _find_driver() -> Driver | str:
    override = os.environ.get("GPUSHARE_GPU_DRIVER_DIR")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "GPUSHARE_MEMORY_LIMIT")}
    if override:
        lib_dir = Path(override)
        for name in ("libnvidia-ml.so.1", "libcuda.so.1"):
            if not (lib_dir / name).exists():
                return f"GPUSHARE_GPU_DRIVER_DIR={override} has no {name}"
        smi = next(
            (str(p) for p in (lib_dir / "nvidia-smi", lib_dir.parent / "bin" / "nvidia-smi") if p.exists()), None
        )
        if smi is None:
            return f"no nvidia-smi beside GPUSHARE_GPU_DRIVER_DIR={override}"
        env["LD_LIBRARY_PATH"] = str(lib_dir)
        return Driver(lib_dir, smi, env)
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return f"no NVIDIA driver on this machine: {exc}"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no NVIDIA driver on this machine: nvidia-smi is not on PATH"
    return Driver(None, smi, env)


@pytest.fixture(scope="session")
def driver() -> Driver:
    found = _find_driver()
    if isinstance(found, str):
        pytest.skip(found)
    shim = NATIVE / "lib" / "libgpushare-shim.so"
    if not shim.exists():
        pytest.fail(f"{shim} is missing: run make -C native")
    return found


@pytest.fixture(scope="session")
def shim() -> Path:
    """The shipped shim; GPUSHARE_TEST_SHIM names another build (the fault build, when
    tests/native shows these tests catch a broken shim)."""
    return Path(os.environ.get("GPUSHARE_TEST_SHIM") or NATIVE / "lib" / "libgpushare-shim.so")


@pytest.fixture(scope="session")
def probe() -> Path:
    return NATIVE / "bin" / "gpushare-probe"
