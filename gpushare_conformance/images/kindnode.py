"""The kind node image: what `kind create cluster --image` boots, built on this machine.

No registry is reachable, so nothing comes from ``kindest/node``. The image is a Debian
bookworm root filesystem (`ci/kind/build-node-rootfs.sh`: systemd, Debian's containerd,
runc and CNI plugins), the files under `ci/kind/node/` (our entrypoint, units, the
containerd configuration, the pod-network service), the project's Kubernetes build
(kubelet, kubectl, kubeadm) and, under `/kind/images`, the images kubeadm asks for:
kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy and etcd made from
the same build, and the pause image. `gpushare-preload.service` imports them into the
node's containerd before the kubelet starts. The image is made with `docker import` of
the assembled tree and labelled with a key of its inputs, so an unchanged build is
reused.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from gpushare_conformance.fixtures.providers.versions import DEFAULT, KubernetesRelease
from gpushare_conformance.images.build import REPO, _pause_layer, cache_dir
from gpushare_conformance.images.oci import ImageConfig, layer_from_directory, write_archive

Progress = Callable[[str], None]

# The sandbox image the node's containerd runs (ci/kind/node/etc/containerd): kubeadm
# only pre-pulls pause in its preflight, which kind skips, so one tag serves every release.
PAUSE_REF = "registry.k8s.io/pause:3.10.1"
CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy")
BUILD_KEY_LABEL = "gpushare.conformance.io/build-key"
NODE_FILES = REPO / "ci" / "kind" / "node"
# What kube-proxy (iptables mode) runs inside its container, besides the kube binary.
PROXY_TOOLS = (
    "usr/sbin/xtables-nft-multi",
    "usr/sbin/conntrack",
)
IPTABLES_NAMES = (
    "iptables",
    "iptables-save",
    "iptables-restore",
    "ip6tables",
    "ip6tables-save",
    "ip6tables-restore",
    "iptables-nft",
    "iptables-nft-save",
    "iptables-nft-restore",
    "ip6tables-nft",
    "ip6tables-nft-save",
    "ip6tables-nft-restore",
)


class KindNodeImageError(RuntimeError):
    """A prerequisite of the node image is missing or a build step failed."""


def node_image(release: KubernetesRelease = DEFAULT) -> str:
    """The node image's reference for ``release``: one per release, built side by side."""
    return f"localhost/gpushare-conformance/kind-node:{release.version}"


def control_plane_refs(release: KubernetesRelease = DEFAULT) -> list[str]:
    """The image references kubeadm's static pods and kube-proxy DaemonSet name. The
    etcd image holds the project's etcd build (ci/build-kubernetes.sh, ETCD_VERSION)
    under the tag this release's kubeadm asks for."""
    return [f"registry.k8s.io/{name}:{release.version}" for name in CONTROL_PLANE] + [
        f"registry.k8s.io/etcd:{release.etcd_tag}"
    ]


def _run(argv: list[str], what: str, **kwargs) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    except FileNotFoundError as exc:
        raise KindNodeImageError(f"{what}: {argv[0]} not found") from exc
    if result.returncode != 0:
        raise KindNodeImageError(
            f"{what} failed (exit {result.returncode}): {' '.join(argv)}\n{result.stderr.strip()[-2000:]}"
        )
    return result.stdout


def check_docker(docker: str = "docker") -> None:
    """A clear error when Docker is missing or its daemon does not answer."""
    if not shutil.which(docker):
        raise KindNodeImageError(
            f"the Docker CLI ({docker}) is not installed: install Debian's docker.io "
            "(bash ci/install-host-deps.sh) and start the daemon (bash ci/docker-service.sh start)"
        )
    result = subprocess.run(
        [docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=30, check=False
    )
    if result.returncode != 0:
        raise KindNodeImageError(
            "the Docker daemon does not answer (start it: bash ci/docker-service.sh start): "
            + (result.stderr.strip() or result.stdout.strip())
        )


def _script_output(argv: list[str], what: str, release: KubernetesRelease) -> Path:
    out = _run(["bash", *argv], what, env={**os.environ, "K8S_VERSION": release.version})
    lines = out.strip().splitlines()
    if not lines:
        raise KindNodeImageError(f"{what}: printed no path")
    return Path(lines[-1])


def _file_key(path: Path) -> str:
    st = path.stat()
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def build_key(kube_bin: Path, kubeadm: Path, rootfs: Path, release: KubernetesRelease = DEFAULT) -> str:
    """A digest of every input of the node image."""
    digest = hashlib.sha256()
    for path in sorted(p for p in NODE_FILES.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(NODE_FILES)).encode())
        digest.update(path.read_bytes())
    for path in (Path(__file__), REPO / "ci" / "images" / "pause.c"):
        digest.update(path.read_bytes())
    for path in (kube_bin / "kube", kube_bin / "etcd", kubeadm, rootfs):
        digest.update(_file_key(path.resolve()).encode())
    digest.update(f"{release.version} {release.etcd_tag}".encode())
    return digest.hexdigest()[:20]


def existing_key(ref: str, docker: str = "docker") -> str | None:
    result = subprocess.run(
        [docker, "image", "inspect", "-f", f'{{{{index .Config.Labels "{BUILD_KEY_LABEL}"}}}}', ref],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        check=False,
    )
    return result.stdout.strip() or None if result.returncode == 0 else None


def _library_closure(root: Path, binaries: list[str]) -> set[str]:
    """Paths (relative to `root`) of `binaries` and every shared library they load,
    symlinks and their targets, as `ldd` run inside `root` reports them."""
    wanted: set[str] = set()
    todo = list(binaries)
    seen: set[str] = set()
    while todo:
        rel = todo.pop().lstrip("/")
        if rel in seen:
            continue
        seen.add(rel)
        _add_with_links(root, rel, wanted)
        out = subprocess.run(
            ["chroot", str(root), "ldd", "/" + rel],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        ).stdout
        for line in out.splitlines():
            match = re.search(r"(/\S+) \(0x", line)
            if match:
                todo.append(match.group(1))
    return wanted


def _add_with_links(root: Path, rel: str, wanted: set[str]) -> None:
    """Add `rel` and, when it or a parent directory is a symlink, what it points to."""
    path = root / rel
    for _ in range(40):
        wanted.add(rel)
        if not path.is_symlink():
            break
        target = os.readlink(path)
        path = (path.parent / target) if not target.startswith("/") else root / target.lstrip("/")
        path = Path(os.path.normpath(path))
        rel = str(path.relative_to(root))
    # a library found through a symlinked directory (/lib -> usr/lib)
    real = Path(os.path.realpath(root / rel))
    try:
        wanted.add(str(real.relative_to(root.resolve())))
    except ValueError:
        pass


def _copy_into(root: Path, rels: set[str], dest: Path) -> None:
    for rel in sorted(rels):
        src = root / rel
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            if not target.is_symlink():
                target.symlink_to(os.readlink(src))
        elif src.is_file():
            shutil.copy2(src, target)


def _control_plane_archive(
    root: Path, kube_bin: Path, work: Path, progress: Progress, release: KubernetesRelease
) -> Path:
    """One image under every control-plane name: glibc, iptables and conntrack from
    the node root filesystem, the kube multi-call binary and etcd in /usr/local/bin."""
    progress("kind node image: control-plane images (kube-apiserver, ..., etcd) from the local build")
    staging = root / "tmp" / "gpushare-binaries"
    staging.mkdir(parents=True, exist_ok=True)
    shutil.copy2(kube_bin / "kube", staging / "kube")
    shutil.copy2(kube_bin / "etcd", staging / "etcd")
    rels = _library_closure(root, ["tmp/gpushare-binaries/kube", "tmp/gpushare-binaries/etcd", *PROXY_TOOLS])
    rels = {r for r in rels if not r.startswith("tmp/")}
    xtables = root / "usr" / "lib" / "x86_64-linux-gnu" / "xtables"
    if xtables.is_dir():
        extensions = [str(p.relative_to(root)) for p in xtables.glob("*.so")]
        rels |= _library_closure(root, extensions)
    base = work / "cp-base"
    _copy_into(root, rels, base)
    sbin = base / "usr" / "sbin"
    sbin.mkdir(parents=True, exist_ok=True)
    for name in IPTABLES_NAMES:
        link = sbin / name
        if not link.exists() and not link.is_symlink():
            link.symlink_to("xtables-nft-multi")
    for directory in ("tmp", "var/run", "run", "etc"):
        (base / directory).mkdir(parents=True, exist_ok=True)
    (base / "tmp").chmod(0o1777)
    (base / "etc" / "passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    )
    (base / "etc" / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
    (base / "etc" / "nsswitch.conf").write_text("hosts: files dns\n")
    bin_dir = base / "usr" / "local" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(staging / "kube", bin_dir / "kube")
    shutil.copy2(staging / "etcd", bin_dir / "etcd")
    for name in CONTROL_PLANE:
        (bin_dir / name).symlink_to("kube")
    shutil.rmtree(staging)
    layer = layer_from_directory(base, work / "layer-control-plane.tar")
    config = ImageConfig(
        env={"PATH": "/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"},
        labels={
            "org.opencontainers.image.source": "gpushare-conformance",
            "org.opencontainers.image.version": release.version,
        },
    )
    return write_archive([layer], config, control_plane_refs(release), work / "control-plane.oci.tar")


def _pause_archive(work: Path, progress: Progress) -> Path:
    return write_archive(
        [_pause_layer(work, progress)], ImageConfig(entrypoint=["/pause"]), [PAUSE_REF], work / "pause.oci.tar"
    )


def _systemd_tweaks(root: Path) -> None:
    """What kind's base image does to Debian's systemd: no units the node container
    cannot or need not run (udev, getty, tmpfiles at boot), no kernel log reading."""
    system = root / "lib" / "systemd" / "system"
    for pattern in (
        "multi-user.target.wants/*",
        "local-fs.target.wants/*",
        "sockets.target.wants/*udev*",
        "sockets.target.wants/*initctl*",
        "basic.target.wants/*",
        "sysinit.target.wants/systemd-tmpfiles-setup.service",
    ):
        for path in system.glob(pattern):
            path.unlink()
    for path in (root / "etc" / "systemd" / "system").glob("*.wants/*"):
        path.unlink()
    with open(root / "etc" / "systemd" / "journald.conf", "a") as conf:
        conf.write("ReadKMsg=no\n")


def build_kind_node_image(
    progress: Progress = print,
    docker: str = "docker",
    rebuild: bool = False,
    release: KubernetesRelease = DEFAULT,
) -> str:
    """Build (or reuse) the node image of ``release``; returns its reference. Two
    bring-ups at once (the test command's kind clusters) build it once: the second waits."""
    check_docker(docker)
    if os.geteuid() != 0:
        raise KindNodeImageError("building the kind node image needs root (debootstrap, chroot, device nodes)")
    cache_dir().mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_dir() / f"kind-node-image-{release.version}.lock")):
        return _build_kind_node_image(progress, docker, rebuild, release)


def _build_kind_node_image(progress: Progress, docker: str, rebuild: bool, release: KubernetesRelease) -> str:
    image = node_image(release)
    progress("kind node image: Kubernetes binaries (ci/build-kubernetes.sh, cached)")
    kube_bin = _script_output([str(REPO / "ci" / "build-kubernetes.sh")], "ci/build-kubernetes.sh", release)
    progress("kind node image: kubeadm (ci/build-kubernetes.sh --kubeadm, cached)")
    kubeadm = _script_output(
        [str(REPO / "ci" / "build-kubernetes.sh"), "--kubeadm"], "ci/build-kubernetes.sh --kubeadm", release
    )
    progress("kind node image: node root filesystem (ci/kind/build-node-rootfs.sh, cached)")
    rootfs = _script_output(
        [str(REPO / "ci" / "kind" / "build-node-rootfs.sh")], "ci/kind/build-node-rootfs.sh", release
    )
    key = build_key(kube_bin, kubeadm, rootfs, release)
    if not rebuild and existing_key(image, docker) == key:
        progress(f"kind node image: {image} is up to date")
        return image
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kind-node-", dir=cache_dir()) as tmp:
        work = Path(tmp)
        root = work / "root"
        root.mkdir()
        progress("kind node image: assembling the root filesystem")
        _run(["tar", "--numeric-owner", "-xpf", str(rootfs), "-C", str(root)], "unpacking the node root filesystem")
        images = root / "kind" / "images"
        images.mkdir(parents=True)
        shutil.copy2(_control_plane_archive(root, kube_bin, work, progress, release), images / "control-plane.oci.tar")
        shutil.copy2(_pause_archive(work, progress), images / "pause.oci.tar")
        _systemd_tweaks(root)
        _run(["cp", "-a", f"{NODE_FILES}/.", str(root)], "copying ci/kind/node into the image")
        usr_bin = root / "usr" / "bin"
        shutil.copy2(kube_bin / "kube", usr_bin / "kube")
        for name in ("kubelet", "kubectl"):
            (usr_bin / name).symlink_to("kube")
        shutil.copy2(kubeadm, usr_bin / "kubeadm")
        (root / "kind" / "version").write_text(release.version + "\n")
        (root / "etc" / "kubernetes" / "manifests").mkdir(parents=True, exist_ok=True)
        _run(
            [
                "chroot",
                str(root),
                "systemctl",
                "enable",
                "containerd.service",
                "gpushare-preload.service",
                "kubelet.service",
                "gpushare-podnet.service",
            ],
            "enabling the node's units",
        )
        _run(["chroot", str(root), "systemctl", "mask", "systemd-binfmt.service"], "masking systemd-binfmt")
        previous = _image_id(image, docker)
        progress(f"kind node image: docker import as {image}")
        tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        try:
            _run(
                [
                    docker,
                    "import",
                    "--change",
                    'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]',
                    "--change",
                    "ENV container=docker",
                    "--change",
                    f"LABEL {BUILD_KEY_LABEL}={key}",
                    "-",
                    image,
                ],
                "docker import of the node image",
                stdin=tar.stdout,
            )
        finally:
            if tar.stdout:
                tar.stdout.close()
            tar.wait()
        if tar.returncode != 0:
            raise KindNodeImageError(f"tar of the node root filesystem failed (exit {tar.returncode})")
    if previous and previous != _image_id(image, docker):
        # the image it replaces, now untagged (kept while a container still uses it)
        subprocess.run([docker, "rmi", previous], capture_output=True, check=False)
    return image


def _image_id(ref: str, docker: str) -> str | None:
    result = subprocess.run(
        [docker, "image", "inspect", "-f", "{{.Id}}", ref], capture_output=True, text=True, check=False
    )
    return result.stdout.strip() or None if result.returncode == 0 else None
