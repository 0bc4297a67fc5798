"""tests/gpu runs the shim over a real driver; here it runs over the mock driver (which
behaves like the real one), to show those tests pass on a sound shim and fail on a
broken one before they ever meet a GPU machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gpushare_conformance import native

REPO = Path(__file__).resolve().parents[2]


def _run_gpu_tests(**extra_env: str) -> subprocess.CompletedProcess:
    build = native.ensure_built()
    env = {
        **os.environ,
        "GPUSHARE_GPU_DRIVER_DIR": str(build / "mock-lib"),
        "GPUSHARE_MOCK_INVENTORY": str(REPO / "ci" / "local" / "inventory-default.yaml"),
        **extra_env,
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(REPO / "tests" / "gpu"),
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:gpushare_conformance",
            "-rfs",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_gpu_tests_pass_over_the_mock_driver():
    result = _run_gpu_tests()
    assert result.returncode == 0, result.stdout[-4000:]
    assert "10 passed" in result.stdout, result.stdout[-2000:]


def test_gpu_tests_catch_a_shim_that_misses_a_path():
    result = _run_gpu_tests(
        GPUSHARE_SHIM_FAULT="unguarded-managed",
        GPUSHARE_TEST_SHIM=str(native.ensure_built() / "lib" / "libgpushare-shim-faults.so"),
    )
    assert result.returncode == 1, f"exit {result.returncode}: {result.stdout[-4000:]}"
    assert (
        "FAILED tests/gpu/test_shim_on_real_driver.py::test_allocation_past_the_share_fails_on_every_path[managed]"
        in result.stdout
    ), result.stdout[-3000:]
