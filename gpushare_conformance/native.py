"""Where the native GPU layer (mock NVML/CUDA, isolation shim, mock nvidia-smi, probe) lives.

The artefacts are built by ``make -C native`` into ``native/build``; an installed copy
elsewhere (a container image, ``/usr/local/gpushare``) is named by ``GPUSHARE_NATIVE_DIR``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from filelock import FileLock

ARTEFACTS = (
    "lib/libnvidia-ml.so.1",
    "lib/libcuda.so.1",
    "lib/libgpushare-shim.so",
    "lib/libgpushare-shim-faults.so",
    "bin/nvidia-smi",
    "bin/gpushare-probe",
    "toolkit/gpushare-mock-runtime",
)


class NativeBuildError(RuntimeError):
    """The native artefacts are missing and cannot be built here."""


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def source_dir() -> Path:
    """The C sources and Makefile (``<repo>/native``)."""
    return repo_root() / "native"


def native_dir() -> Path:
    """Build output: ``$GPUSHARE_NATIVE_DIR`` if set, else ``<repo>/native/build``."""
    override = os.environ.get("GPUSHARE_NATIVE_DIR")
    return Path(override) if override else source_dir() / "build"


def lib_dir(root: Path | None = None) -> Path:
    return (root or native_dir()) / "lib"


def bin_dir(root: Path | None = None) -> Path:
    return (root or native_dir()) / "bin"


def mock_lib_dir(root: Path | None = None) -> Path:
    """A directory holding only the two mock libraries (for ``LD_LIBRARY_PATH``)."""
    return (root or native_dir()) / "mock-lib"


def shim_path(root: Path | None = None) -> Path:
    return lib_dir(root) / "libgpushare-shim.so"


def missing_artefacts(root: Path | None = None) -> list[str]:
    base = root or native_dir()
    return [name for name in ARTEFACTS if not (base / name).exists()]


def _make(target: str | None, build: str) -> None:
    if shutil.which("gcc") is None:
        raise NativeBuildError("gcc not found: install it (Debian package 'gcc') to build native/")
    if shutil.which("make") is None:
        raise NativeBuildError("make not found: install it (Debian package 'make') to build native/")
    # One compiler per core: the files are independent, and a clean clone builds them all.
    cmd = ["make", f"-j{os.cpu_count() or 1}", "-C", str(source_dir()), f"BUILD={build}"]
    if target:
        cmd.append(target)
    # One make per build directory at a time: pytest workers asking for the same build
    # at once would otherwise write the same objects under each other.
    out = source_dir() / build
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / ".make.lock")):
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise NativeBuildError(f"'{' '.join(cmd)}' failed (exit {proc.returncode}):\n{tail}")


def ensure_built(asan: bool = False) -> Path:
    """Return the artefact directory, running make first when it is the repo's build.

    With ``GPUSHARE_NATIVE_DIR`` set the directory is taken as installed and only
    checked; ``asan=True`` builds the AddressSanitizer variant in ``native/build-asan``.
    """
    if asan:
        _make("asan", "build-asan")
        return source_dir() / "build-asan"
    root = native_dir()
    if os.environ.get("GPUSHARE_NATIVE_DIR"):
        missing = missing_artefacts(root)
        if missing:
            raise NativeBuildError(f"GPUSHARE_NATIVE_DIR={root} lacks {', '.join(missing)}")
        return root
    if not (source_dir() / "Makefile").exists():
        raise NativeBuildError(f"no native sources at {source_dir()} and GPUSHARE_NATIVE_DIR is not set")
    _make(None, "build")  # incremental: a no-op when up to date
    return root
