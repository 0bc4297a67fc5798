"""`gpushare-conformance rbac --print|--apply`: the service account and role the suite
runs under in a pod (`--cluster in-cluster`, the suite image; docs/in-cluster.md)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from gpushare_conformance.names import MANIFESTS

RBAC_MANIFEST = MANIFESTS / "in-cluster" / "rbac.yaml"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "rbac",
        help="print or apply the service account and cluster role the suite needs in a pod",
        description=(
            "The Namespace, ServiceAccount, ClusterRole and ClusterRoleBinding the checks need to judge a "
            f"deployed stack from inside the cluster ({RBAC_MANIFEST.relative_to(MANIFESTS.parent)}). "
            "--print writes them to stdout; --apply runs `kubectl apply -f -` with them."
        ),
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--print", dest="show", action="store_true", help="write the manifest to stdout")
    action.add_argument("--apply", action="store_true", help="kubectl apply the manifest")
    parser.add_argument("--kubeconfig", default=None, help="with --apply: kubeconfig (default kubectl's)")
    parser.add_argument("--context", default=None, help="with --apply: kubeconfig context")
    parser.add_argument("--kubectl", default="kubectl", help="with --apply: the kubectl binary (default kubectl)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    manifest = RBAC_MANIFEST.read_text()
    if args.show:
        if args.kubeconfig or args.context:
            print("error: --kubeconfig and --context only apply with --apply", file=sys.stderr)
            return 2
        sys.stdout.write(manifest)
        return 0
    if not shutil.which(args.kubectl):
        print(f"error: --kubectl: {args.kubectl!r} is neither an existing file nor a program on PATH", file=sys.stderr)
        return 2
    argv = [args.kubectl]
    if args.kubeconfig:
        argv += ["--kubeconfig", args.kubeconfig]
    if args.context:
        argv += ["--context", args.context]
    applied = subprocess.run([*argv, "apply", "-f", "-"], input=manifest, text=True, check=False)
    return applied.returncode
