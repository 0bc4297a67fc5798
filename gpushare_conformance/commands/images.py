"""`gpushare-conformance images build`: build the suite's images without a registry."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "images",
        help="build the stack, workload and pause images as OCI archives",
        description=(
            "Build the images the suite deploys (no registry is used): the stack image, the "
            "GPU-less workload image and the pause image, as OCI archives that "
            "`ctr -n k8s.io images import` or `kind load image-archive` accept."
        ),
    )
    parser.add_argument("action", choices=("build",), help="what to do")
    parser.add_argument("--out", default="build/images", help="directory for the archives (default: build/images)")
    parser.add_argument(
        "--native-build", default=None, help="native build directory to ship (default: native/build, built if missing)"
    )
    parser.add_argument(
        "--kind-node",
        action="store_true",
        help="build the kind node image instead (Docker image localhost/gpushare-conformance/kind-node:<k8s "
        "version>, for `kind create cluster --image`): systemd, containerd, the project's kubelet, "
        "kubeadm and control-plane images, no registry; needs root and a running Docker daemon",
    )
    parser.add_argument(
        "--rebuild", action="store_true", help="with --kind-node: rebuild even when the image is up to date"
    )
    parser.add_argument(
        "--kubernetes-version",
        default=None,
        metavar="VERSION",
        help="with --kind-node: the Kubernetes release of the node image, a minor (1.35, 1.36, 1.37) or its served "
        "patch release (default: the newest served)",
    )
    parser.set_defaults(func=run)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    import subprocess

    from gpushare_conformance.images.build import REPO, build_images

    if args.kind_node:
        from gpushare_conformance.fixtures.providers.versions import VersionError, resolve
        from gpushare_conformance.images.kindnode import KindNodeImageError, build_kind_node_image

        try:
            release = resolve(args.kubernetes_version)
            print(build_kind_node_image(_progress, rebuild=args.rebuild, release=release))
        except (KindNodeImageError, VersionError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.rebuild or args.kubernetes_version:
        given = "--rebuild" if args.rebuild else f"--kubernetes-version {args.kubernetes_version}"
        print(f"error: {given} only applies with --kind-node", file=sys.stderr)
        return 2

    native = Path(args.native_build) if args.native_build else REPO / "native" / "build"
    if args.native_build is None:
        subprocess.run(["make", "-s", "-C", str(REPO / "native")], check=True)
    try:
        built = build_images(Path(args.out), native, lambda m: print(m, file=sys.stderr, flush=True))
    except (FileNotFoundError, RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for archive in built.archives:
        print(archive)
    return 0
