"""The suite image and the busybox image hydrophone runs beside it (docs/in-cluster.md).

The suite image is the stack/workload image's layers (rootfs, dependencies, code) plus
what the checks need in a pod: pytest and the suite's other Python dependencies
(cached by requirement list), kubectl (the project's Kubernetes build, cached by
binary), and the checks with the files they read (``conformance/``, ``fixtures/``,
``manifests/``, the mock GPU models). Its entrypoint follows the conformance image's
contract (``gpushare_conformance.suiteimage``). The busybox image is Debian's static
busybox alone: hydrophone's output container runs ``sleep infinity`` and ``cat`` in it.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from gpushare_conformance.images.bytecode import BYTECODE_FORM, compile_tree
from gpushare_conformance.images.oci import ImageConfig, layer_from_directory, write_archive

SUITE_IMAGE = "localhost/gpushare-conformance/suite:dev"
BUSYBOX_IMAGE = "localhost/gpushare-conformance/busybox:dev"
BUSYBOX_BINARY = Path("/bin/busybox")  # Debian's busybox-static (ci/host-packages.txt)
# The suite's own dependencies (pyproject.toml) that the stack image's layer lacks;
# tests/suite/test_suite_image.py keeps the two lists covering pyproject's.
SUITE_REQUIREMENTS = (
    "pytest>=8",
    "pexpect>=4.9",
    "allure-pytest>=2.13",
    "hypothesis>=6.100",
    "pytest-xdist>=3.6",
    "filelock>=3.12",
    "rich>=13",
)
SUITE_SITE = "/opt/gpushare/suite-site"
APP = "/opt/gpushare/app"

Progress = Callable[[str], None]


def suite_image_config() -> ImageConfig:
    """Environment and entrypoint of the suite image."""
    return ImageConfig(
        env={
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "PYTHONPATH": f"{APP}:/opt/gpushare/site:{SUITE_SITE}",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "GPUSHARE_REPO_ROOT": APP,
        },
        entrypoint=["python3", "-m", "gpushare_conformance.suiteimage.run"],
        working_dir="/tmp",
        labels={"org.opencontainers.image.source": "gpushare-conformance"},
    )


def write_suite_image(
    base_layers: list[Path], out_dir: Path, repo: Path, cache: Path, wheels: Path, progress: Progress
) -> Path:
    """The suite image's archive: ``base_layers`` (the app image's) and the suite's own."""
    layers = [
        *base_layers,
        suite_deps_layer(cache, wheels, progress),
        kubectl_layer(cache, repo, progress),
        checks_layer(out_dir, repo, progress),
    ]
    progress("images: writing the suite archive")
    return write_archive(layers, suite_image_config(), [SUITE_IMAGE], out_dir / "gpushare-suite.oci.tar")


def suite_deps_layer(cache: Path, wheels: Path, progress: Progress) -> Path:
    """pytest and the suite's other dependencies under SUITE_SITE (cached): from the
    cached wheels (ci/setup.sh downloads them) when they suffice, else the index."""
    key_text = "\n".join(SUITE_REQUIREMENTS + (sys.version.split()[0], BYTECODE_FORM))
    key = hashlib.sha256(key_text.encode()).hexdigest()[:16]
    layer = cache / f"image-suite-deps-{key}.tar"
    if layer.exists():
        return layer
    progress("images: installing the suite's Python dependencies into a layer (once)")
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        target = Path(tmp) / SUITE_SITE.lstrip("/")
        base = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(target)]
        offline = subprocess.run(
            [*base, "--no-index", "--find-links", str(wheels), *SUITE_REQUIREMENTS],
            capture_output=True,
            text=True,
            check=False,
        )
        if offline.returncode != 0:
            shutil.rmtree(target, ignore_errors=True)
            subprocess.run([*base, *SUITE_REQUIREMENTS], check=True)
        compile_tree(Path(tmp), target)
        return layer_from_directory(Path(tmp), layer)


def kubectl_layer(cache: Path, repo: Path, progress: Progress) -> Path:
    """/usr/local/bin/kubectl: the project's Kubernetes build (ci/build-kubernetes.sh,
    cached: kubectl on its own, or the multi-call binary it links to in an older build),
    cached per binary."""
    result = subprocess.run(
        ["bash", str(repo / "ci" / "build-kubernetes.sh")], stdout=subprocess.PIPE, text=True, check=True
    )
    kube = (Path(result.stdout.strip().splitlines()[-1]) / "kubectl").resolve()
    stat = kube.stat()
    key = hashlib.sha256(f"{kube}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    layer = cache / f"image-kubectl-{key}.tar"
    if layer.exists():
        return layer
    progress("images: kubectl layer (once per Kubernetes build)")
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        bin_dir = Path(tmp) / "usr" / "local" / "bin"
        bin_dir.mkdir(parents=True)
        shutil.copy2(kube, bin_dir / "kubectl")
        return layer_from_directory(Path(tmp), layer)


def checks_layer(out_dir: Path, repo: Path, progress: Progress) -> Path:
    """The checks and what they read, laid out as the checkout (GPUSHARE_REPO_ROOT)."""
    progress("images: suite layer (checks, fixtures, manifests)")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / APP.lstrip("/")
        shutil.copytree(repo / "conformance", app / "gpushare_conformance" / "conformance", ignore=ignore)
        shutil.copytree(repo / "fixtures", app / "gpushare_conformance" / "fixtures", ignore=ignore)
        shutil.copytree(repo / "manifests", app / "manifests", ignore=ignore)
        shutil.copytree(repo / "native" / "models", app / "native" / "models", ignore=ignore)
        compile_tree(Path(tmp), app)
        return layer_from_directory(Path(tmp), out_dir / "layer-suite.tar")


def write_busybox_image(out_dir: Path, progress: Progress, busybox: Path = BUSYBOX_BINARY) -> Path:
    """The busybox image: the static binary and a link per applet it lists."""
    if not busybox.is_file():
        raise FileNotFoundError(f"{busybox} is missing: install Debian's busybox-static (ci/host-packages.txt)")
    progress("images: busybox")
    applets = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True).stdout.split()
    with tempfile.TemporaryDirectory() as tmp:
        bin_dir = Path(tmp) / "bin"
        bin_dir.mkdir()
        shutil.copy2(busybox, bin_dir / "busybox")
        for applet in applets:
            if applet != "busybox" and "/" not in applet:
                (bin_dir / applet).symlink_to("busybox")
        (Path(tmp) / "tmp").mkdir()
        (Path(tmp) / "tmp").chmod(0o1777)
        layer = layer_from_directory(Path(tmp), out_dir / "layer-busybox.tar")
    return write_archive(
        [layer],
        ImageConfig(env={"PATH": "/bin"}, cmd=["sh"]),
        [BUSYBOX_IMAGE],
        out_dir / "busybox.oci.tar",
    )
