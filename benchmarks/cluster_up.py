"""Benchmark: warm `cluster up` (node Ready, stack deployed, GPU resources advertised)
and `down` of the local provider. Target: warm up under 30 s.

Run as root after one cold `up` (which builds and caches everything):
    .venv/bin/python benchmarks/cluster_up.py --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import time

from gpushare_conformance.fixtures.providers.local import LocalProvider

TARGET_UP_SECONDS = 30.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="up/down cycles to time (default 3)")
    parser.add_argument("--state-dir", help="local provider state directory")
    args = parser.parse_args()
    provider = LocalProvider(state_dir=args.state_dir)
    quiet = lambda message: None  # noqa: E731 - progress lines would drown the figures
    provider.down(quiet)
    print("warming: one up/down so caches and images exist")
    provider.up(quiet)
    provider.down(quiet)
    ups, downs = [], []
    for round_no in range(1, args.rounds + 1):
        start = time.monotonic()
        provider.up(quiet)
        ups.append(time.monotonic() - start)
        start = time.monotonic()
        provider.down(quiet)
        downs.append(time.monotonic() - start)
        print(f"round {round_no}: up {ups[-1]:.1f}s  down {downs[-1]:.1f}s")
    median_up = statistics.median(ups)
    print(
        f"warm up   median {median_up:.1f}s  min {min(ups):.1f}s  max {max(ups):.1f}s  (target < {TARGET_UP_SECONDS:.0f}s: {'met' if median_up < TARGET_UP_SECONDS else 'NOT met'})"
    )
    print(f"down      median {statistics.median(downs):.1f}s  min {min(downs):.1f}s  max {max(downs):.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
