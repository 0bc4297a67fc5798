"""The `gpushare-conformance` command: a thin argparse root over `commands/*`.

Each subcommand lives in its own module exposing `register(subparsers)`; the module
sets `func` on its parser, which receives the parsed namespace and returns an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def package_version() -> str:
    """The installed distribution's version (importlib.metadata), for ``--version``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpushare-conformance")
    except PackageNotFoundError:
        from gpushare_conformance import __version__

        return f"{__version__} (not installed)"


# Order is the order shown in --help.
COMMAND_MODULES = ("run", "cluster", "parse", "sandbox", "images", "rbac")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpushare-conformance",
        description=(
            "Conformance suite for GPU memory sharing on Kubernetes: deploys a sharing "
            "stack, runs the seed's multi-GPU TensorFlow Job and checks card counts, "
            "per-card totals, isolation and the sharing restrictions."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default=None,
        help="logging of the command and of the run it starts (run passes it to pytest's --log-level); default WARNING",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"gpushare_conformance.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"gpushare_conformance.commands.{name}":
                continue  # subcommand not built yet
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    logging.basicConfig(level=args.log_level or "WARNING", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
