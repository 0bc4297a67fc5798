"""`gpushare-conformance images build|push`: build the suite's images as archives (no
registry needed), and push them to a registry for clusters that cannot import archives."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "images",
        help="build the stack, workload and pause images as OCI archives; push them to a registry",
        description=(
            "build: the images the suite deploys (no registry is used): the stack image, the "
            "GPU-less workload image and the pause image, and the suite image (the checks as a Kubernetes "
            "conformance image, for hydrophone: docs/in-cluster.md) with its busybox, as OCI archives that "
            "`ctr -n k8s.io images import` or `kind load image-archive` accept. "
            "push REGISTRY: copy every image of those archives to REGISTRY with skopeo, "
            "localhost/gpushare-conformance/<name>:<tag> becoming REGISTRY/gpushare-conformance/<name>:<tag>, "
            "the names `run --image-registry REGISTRY` deploys (docs/registry.md)."
        ),
    )
    parser.add_argument("action", choices=("build", "push"), help="build the archives, or push them to REGISTRY")
    parser.add_argument(
        "registry",
        nargs="?",
        default=None,
        metavar="REGISTRY",
        help="with push: host[:port][/path] of the registry, e.g. registry.example.com:5000/team",
    )
    parser.add_argument(
        "--out",
        default="build/images",
        help="directory for the archives (build writes them there, push reads every *.oci.tar there; "
        "default: build/images)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="with push: the registry speaks plain HTTP or has a certificate this host does not trust",
    )
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

    if args.action == "push":
        return _push(args)
    if args.registry is not None or args.insecure:
        given = f"REGISTRY {args.registry}" if args.registry is not None else "--insecure"
        print(f"error: {given} only applies to `images push`", file=sys.stderr)
        return 2
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
        built = build_images(Path(args.out), native, lambda m: print(m, file=sys.stderr, flush=True), suite=True)
    except (FileNotFoundError, RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for archive in built.archives:
        print(archive)
    return 0


def _push(args: argparse.Namespace) -> int:
    from gpushare_conformance.images.registry import RegistryError, check_registry, find_archives, push

    for given, flag in ((args.kind_node, "--kind-node"), (args.rebuild, "--rebuild")):
        if given:
            print(f"error: {flag} only applies to `images build`", file=sys.stderr)
            return 2
    if args.kubernetes_version or args.native_build:
        print("error: --kubernetes-version and --native-build only apply to `images build`", file=sys.stderr)
        return 2
    if args.registry is None:
        print("error: images push needs REGISTRY (host[:port][/path])", file=sys.stderr)
        return 2
    try:
        registry = check_registry(args.registry)
    except RegistryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        pushed = push(find_archives(Path(args.out)), registry, tls_verify=not args.insecure, progress=_progress)
    except RegistryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for ref in pushed:
        print(ref)
    return 0
