"""Recipes for the suite's images: the stack, the GPU-less workload, the pause image
(and, on request, the suite image with its busybox: images/suite.py).

Layers, bottom to top: a Debian rootfs with python3 (`ci/build-rootfs.sh`, cached), the
Python dependencies (pip `--target`, cached by requirement list), then the project's
code, `native/build` and the workload script (rebuilt each time: small). The stack and
the workload share all layers, so they are one image under two names.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpushare_conformance.images.bytecode import BYTECODE_FORM, compile_tree
from gpushare_conformance.images.oci import ImageConfig, layer_from_directory, write_archive

REPO = Path(__file__).resolve().parents[2]
STACK_IMAGE = "localhost/gpushare-conformance/stack:dev"
WORKLOAD_IMAGE = "localhost/gpushare-conformance/tf-mnist-mock:dev"
PAUSE_IMAGE = "localhost/gpushare-conformance/pause:3.10"
ALL_IMAGES = (STACK_IMAGE, WORKLOAD_IMAGE, PAUSE_IMAGE)

# What runs inside the images: the stack's runtime needs and the workload's trainer.
IMAGE_REQUIREMENTS = (
    "kubernetes>=31,<37",  # pyproject.toml says why
    "PyYAML>=6",
    # Same floors as pyproject.toml: the generated stubs check the protobuf runtime.
    "grpcio>=1.85.1",
    "protobuf>=7.35.1,<8",
    "nvidia-ml-py>=12.535",
    "numpy>=1.26",
    "scikit-learn>=1.4",
    # the extender decodes requests with msgspec (gpushare_stack/extender/wire.py) and is
    # served by Hypercorn (gpushare_stack/extender/server.py)
    "msgspec>=0.18",
    "hypercorn>=0.17",
)
IMAGE_PYTHON = (3, 11)  # Debian bookworm's python3
# gpushare_doubles: the peers' flavors and the faults, which the stack loads by name for
# --flavor and --fault (gpushare_stack/variants.py); the test images carry them.
APP_PACKAGES = ("gpushare_conformance", "gpushare_stack", "gpushare_doubles")
WORKLOAD_SCRIPT = "root/tensorflow-sample-code/tfjob/docker/mnist/main.py"

Progress = Callable[[str], None]


def cache_dir() -> Path:
    return Path(os.environ.get("GPUSHARE_CACHE", "/var/cache/gpushare-conformance"))


@dataclass
class BuiltImages:
    """OCI archives ready for `ctr images import` or `kind load image-archive`."""

    app: Path  # stack + workload (two names)
    pause: Path
    # The suite image and the busybox beside it (images/suite.py), when asked for.
    suite: Path | None = None
    busybox: Path | None = None

    @property
    def archives(self) -> list[Path]:
        return [self.pause, self.app] + [a for a in (self.suite, self.busybox) if a is not None]


def build_images(out_dir: Path, native_build: Path, progress: Progress = print, suite: bool = False) -> BuiltImages:
    """Build every image into `out_dir` and return the archives; with ``suite``, the
    suite image and its busybox too (not needed by a session's own checks)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for binary in ("bin/gpushare-probe", "bin/gpushare-attack", "bin/nvidia-smi", "lib/libgpushare-shim.so"):
        if not (native_build / binary).exists():
            raise FileNotFoundError(
                f"native build incomplete: {native_build / binary} is missing (run `make -C native`)"
            )
    rootfs = _rootfs_layer(progress)
    deps = _deps_layer(progress)
    app = _app_layer(out_dir, native_build, progress)
    config = ImageConfig(
        env={
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "PYTHONPATH": "/opt/gpushare/app:/opt/gpushare/site",
            "PYTHONUNBUFFERED": "1",
            "MNIST_STEP_DELAY_SECONDS": "0.002",
        },
        cmd=["python3", "-m", "gpushare_stack.extender", "--help"],
        working_dir="/root",
        labels={"org.opencontainers.image.source": "gpushare-conformance"},
    )
    progress("images: writing the stack/workload archive")
    app_archive = write_archive(
        [rootfs, deps, app], config, [STACK_IMAGE, WORKLOAD_IMAGE], out_dir / "gpushare-app.oci.tar"
    )
    pause_archive = write_archive(
        [_pause_layer(out_dir, progress)],
        ImageConfig(entrypoint=["/pause"]),
        [PAUSE_IMAGE],
        out_dir / "pause.oci.tar",
    )
    built = BuiltImages(app=app_archive, pause=pause_archive)
    if suite:
        from gpushare_conformance.images.suite import write_busybox_image, write_suite_image

        built.suite = write_suite_image(
            [rootfs, deps, app], out_dir, REPO, cache_dir(), cache_dir() / "wheels", progress
        )
        built.busybox = write_busybox_image(out_dir, progress)
    return built


def _rootfs_layer(progress: Progress) -> Path:
    progress("images: base rootfs (debootstrap once, then cached)")
    result = subprocess.run(
        ["bash", str(REPO / "ci" / "build-rootfs.sh")], stdout=subprocess.PIPE, text=True, check=True
    )
    return Path(result.stdout.strip().splitlines()[-1])


def _deps_layer(progress: Progress) -> Path:
    if sys.version_info[:2] != IMAGE_PYTHON:
        # Wheels are installed by this interpreter for the image's python3 (bookworm: 3.11).
        raise RuntimeError(
            f"building the image's Python layer needs Python {IMAGE_PYTHON[0]}.{IMAGE_PYTHON[1]} "
            f"(the image's python3); this is {sys.version.split()[0]}"
        )
    key_text = "\n".join(IMAGE_REQUIREMENTS + (sys.version.split()[0], BYTECODE_FORM))
    key = hashlib.sha256(key_text.encode()).hexdigest()[:16]
    layer = cache_dir() / f"image-deps-{key}.tar"
    if layer.exists():
        return layer
    progress("images: installing Python dependencies into the image layer (once)")
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        target = Path(tmp) / "opt" / "gpushare" / "site"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-compile",
                "--target",
                str(target),
                *IMAGE_REQUIREMENTS,
            ],
            check=True,
        )
        compile_tree(Path(tmp), target)
        return layer_from_directory(Path(tmp), layer)


def _app_layer(out_dir: Path, native_build: Path, progress: Progress) -> Path:
    progress("images: project layer (code, native build, workload)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        app = root / "opt" / "gpushare" / "app"
        for package in APP_PACKAGES:
            shutil.copytree(REPO / package, app / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        shutil.copytree(native_build, root / "opt" / "gpushare" / "native", symlinks=True)
        bin_dir = root / "usr" / "local" / "bin"
        bin_dir.mkdir(parents=True)
        shutil.copy2(native_build / "bin" / "gpushare-probe", bin_dir / "gpushare-probe")
        # The hostile checks' attempts and the libraries a workload would bring for them.
        shutil.copy2(native_build / "bin" / "gpushare-attack", bin_dir / "gpushare-attack")
        shutil.copytree(native_build / "lib" / "attack", root / "usr" / "local" / "lib" / "gpushare-attack")
        for command, module in (
            ("gpushare-extender", "gpushare_stack.extender"),
            ("gpushare-device-plugin", "gpushare_stack.deviceplugin"),
            ("gpushare-dra-plugin", "gpushare_stack.dra"),
        ):
            wrapper = bin_dir / command
            wrapper.write_text(f'#!/bin/sh\nexec python3 -m {module} "$@"\n')
            wrapper.chmod(0o755)
        # The seed's command says `python`; Debian names it python3 (python-is-python3).
        (root / "usr" / "bin").mkdir(parents=True)
        (root / "usr" / "bin" / "python").symlink_to("python3")
        script = root / WORKLOAD_SCRIPT
        script.parent.mkdir(parents=True)
        shutil.copy2(REPO / "ci" / "images" / "workload" / "main.py", script)
        (root / "root" / "tensorflow-sample-code" / "data").mkdir(parents=True)
        compile_tree(root, app)
        return layer_from_directory(root, out_dir / "layer-app.tar")


def _pause_layer(out_dir: Path, progress: Progress) -> Path:
    progress("images: pause")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subprocess.run(
            ["gcc", "-static", "-Os", "-o", str(root / "pause"), str(REPO / "ci" / "images" / "pause.c")],
            check=True,
        )
        subprocess.run(["strip", str(root / "pause")], check=True)
        return layer_from_directory(root, out_dir / "layer-pause.tar")
