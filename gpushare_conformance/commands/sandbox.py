"""`gpushare-conformance sandbox`: run a command with a container's GPU view, no cluster.

gpushare-conformance sandbox --inventory inv.yaml --visible 1,2 --mem-per-card 4GiB -- nvidia-smi
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from gpushare_conformance import native
from gpushare_conformance.sandbox import SandboxError, parse_mem_size, parse_visible, sandbox_env


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sandbox",
        help="run a command with the GPU environment the device plugin gives a container (mock GPUs)",
        description=(
            "Run CMD with mock NVML/CUDA libraries first on the library path, the isolation shim "
            "preloaded, the per-card limits and the visible-devices variables, exactly as a container "
            "of the reference stack gets them. nvidia-smi and gpushare-probe on PATH are the mock ones."
        ),
    )
    p.add_argument("--inventory", required=True, type=Path, help="mock inventory YAML (docs/design.md)")
    p.add_argument("--visible", required=True, help="physical card indices, comma list (e.g. 1,2)")
    p.add_argument("--mem-per-card", required=True, help="share of each card, e.g. 4GiB or 4096MiB")
    p.add_argument("--no-isolation", action="store_true", help="leave the shim out (negative control)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    p.set_defaults(func=run, _parser=p)


def run(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args._parser
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        parser.error("a command is required after --")
    try:
        mem = parse_mem_size(args.mem_per_card)
        visible = parse_visible(args.visible)
        root = native.ensure_built()
        env = sandbox_env(
            args.inventory, visible, mem, isolation=not args.no_isolation, base_env=os.environ, native_root=root
        )
    except (SandboxError, native.NativeBuildError) as exc:
        parser.error(str(exc))
    usage = env.get("GPUSHARE_USAGE_FILE")
    try:
        return subprocess.run(cmd, env=env).returncode
    except FileNotFoundError:
        print(f"gpushare-conformance sandbox: command not found: {cmd[0]}", file=sys.stderr)
        return 127
    finally:
        if usage:
            Path(usage).unlink(missing_ok=True)
