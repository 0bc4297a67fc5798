"""`gpushare-conformance cluster up|down|status`: manage a suite cluster by hand."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpushare_conformance.commands.run import KUBERNETES_VERSION_HELP


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cluster",
        help="bring a test cluster up or down (the local provider by default)",
        description="Start, stop or inspect the cluster the suite runs on. `up` on a running cluster reuses it.",
    )
    parser.add_argument("action", choices=("up", "down", "status"), help="what to do")
    parser.add_argument(
        "--provider",
        default="local",
        choices=("local",),
        help="cluster provider; only `local` is managed here (kind and existing clusters are managed by their own tools)",
    )
    parser.add_argument(
        "--state-dir",
        help="where the local cluster keeps its state and logs (default /var/lib/gpushare-conformance/local)",
    )
    parser.add_argument(
        "--inventory",
        help="mock GPU inventory YAML for the node (default: ci/local/inventory-default.yaml, 4 x V100-SXM2-16GB); "
        "checked before anything is torn down or built; a running cluster started with another inventory is "
        "refused (take it down first)",
    )
    parser.add_argument("--no-stack", action="store_true", help="do not deploy the reference stack during `up`")
    parser.add_argument("--kubernetes-version", default=None, metavar="VERSION", help=KUBERNETES_VERSION_HELP)
    parser.set_defaults(func=run)


def check_state_dir(action: str, state_dir: str | None) -> str | None:
    """What is wrong with ``--state-dir`` for ``action``, or None. ``up`` may create it;
    ``status`` and ``down`` only read a state directory a cluster was started with."""
    if state_dir is None:
        return None
    path = Path(state_dir).expanduser()
    if path.exists() and not path.is_dir():
        return f"--state-dir {state_dir}: not a directory"
    if action == "up":
        parent = next((p for p in path.parents if p.exists()), None)
        if parent is not None and not parent.is_dir():
            return f"--state-dir {state_dir}: {parent} is not a directory"
        return None
    if not path.is_dir():
        return f"--state-dir {state_dir}: no such directory (no local cluster was started with it)"
    return None


def run(args: argparse.Namespace) -> int:
    from gpushare_conformance.fixtures.providers.local import LocalProvider
    from gpushare_conformance.fixtures.providers.local.cluster import LocalClusterError

    wrong = check_state_dir(args.action, args.state_dir)
    if wrong is not None:
        print(f"error: {wrong}", file=sys.stderr)
        return 2
    from gpushare_conformance.fixtures.providers.versions import VersionError

    try:
        provider = LocalProvider(
            state_dir=args.state_dir,
            inventory=args.inventory,
            deploy_stack=not args.no_stack,
            kubernetes_version=args.kubernetes_version,
        )
    except VersionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    try:
        if args.action == "up":
            handle = provider.up(progress)
            print(f"export KUBECONFIG={handle.kubeconfig}")
            print(f"# kubectl: {handle.kubectl}")
        elif args.action == "down":
            left = provider.down(progress)
            if left:
                print("error: the host still has: " + "; ".join(left), file=sys.stderr)
                return 1
        else:
            print(provider.status())
    except (LocalClusterError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if args.action == "up":
            provider.down(progress)
        return 130
    return 0
