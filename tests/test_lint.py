"""The code stays linted and formatted: ruff, configured in pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    beside = Path(sys.executable).with_name("ruff")
    found = str(beside) if beside.exists() else shutil.which("ruff")
    assert found, "ruff is not installed: run ci/setup.sh (it installs the project's dev extras)"
    return [found]


def test_ruff_check_passes():
    result = subprocess.run([*_ruff(), "check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr


def test_ruff_format_leaves_nothing_to_change():
    result = subprocess.run(
        [*_ruff(), "format", "--check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr
