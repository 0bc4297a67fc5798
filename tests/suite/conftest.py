"""Fixtures for the tests that install this project into a fresh venv, as a user would
(tests/suite/test_packaging.py, tests/suite/test_beside_other_plugins.py).

The project's wheel is built once per session from a copy of the tree (setuptools'
``build/`` folder never lands in the checkout). A venv is made without pip and filled by
this interpreter's pip (``pip --python``), from the wheels ``ci/setup.sh`` downloads into
the cache: nothing is fetched while the tests run when the cache is complete.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WHEEL_CACHE = Path(os.environ.get("GPUSHARE_CACHE", "/var/cache/gpushare-conformance")) / "wheels"


def run_ok(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run ``argv``; a non-zero exit fails the test with the command and its output."""
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kwargs)
    assert result.returncode == 0, f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


def _pip_has_python_option() -> bool:
    out = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True).stdout
    major = int(re.search(r"pip (\d+)", out).group(1))
    return major >= 22


@dataclass(frozen=True)
class Venv:
    """A fresh venv: its interpreter, its site-packages, and a pip that installs into it."""

    path: Path
    python: Path
    site: Path
    pip: tuple[str, ...]

    @property
    def bin(self) -> Path:
        return self.python.parent


@pytest.fixture(scope="session")
def project_wheel(tmp_path_factory) -> Path:
    """This project's wheel, built from a copy of the checkout."""
    tmp = tmp_path_factory.mktemp("project-wheel")
    source, wheels = tmp / "source", tmp / "wheels"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    for name in ("gpushare_conformance", "gpushare_stack", "gpushare_doubles", "fixtures", "conformance"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    run_ok(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            str(source),
            "-w",
            str(wheels),
        ]
    )
    return sorted(wheels.glob("gpushare_conformance-*.whl"))[-1]


@pytest.fixture
def fresh_venv(tmp_path) -> Venv:
    """An empty venv (no pip, no system site-packages) under the test's tmp_path."""
    if not _pip_has_python_option():
        pytest.fail("pip too old for --python; upgrade pip in .venv")
    path = tmp_path / "venv"
    run_ok([sys.executable, "-m", "venv", "--without-pip", str(path)])
    python = path / "bin" / "python"
    site = Path(run_ok([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    return Venv(path, python, site, (sys.executable, "-m", "pip", "--python", str(python)))
