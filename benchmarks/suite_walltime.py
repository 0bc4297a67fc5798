"""Whole-suite wall time on a warm cluster against the longest single check, as a ratio.

Runs the conformance checks once in parallel (pytest-xdist, ``--workers``), the
cluster kept warm with --gpushare-keep-cluster-up so bring-up is not counted (run once before
to warm it). Each check's own time is its JUnit time less the time it waited for its
GPU capacity (recorded by the placement fixture). Prints the suite's wall time, the
longest check, their ratio (target under 2), the sum of all checks (a serial run),
and, from a replay of the same checks and capacities, what a second GPU node of the
same size would give.

    .venv/bin/python benchmarks/suite_walltime.py [--cluster local] [--workers 4] [-- extra pytest args]
"""

from __future__ import annotations

import argparse
import heapq
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from suite_child import pytest_extra, suite_argv

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Check:
    name: str
    seconds: float  # its own time, placement wait excluded
    need: str  # "alone", "all", or a number of cards


def read_checks(junit: Path) -> list[Check]:
    checks = []
    for case in ET.parse(junit).iter("testcase"):
        if case.find("skipped") is not None:
            continue
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        need, waited = "alone", 0.0
        match = re.match(r"(\S+) waited=([\d.]+)", props.get("gpushare.placement", ""))
        if match:
            need, waited = match.group(1), float(match.group(2))
        name = case.get("classname", "") + "::" + case.get("name", "")
        checks.append(Check(name, max(0.0, float(case.get("time", 0)) - waited), need))
    return checks


def replay(checks: list[Check], nodes: int, cards: int, workers: int) -> float:
    """Makespan of the checks on ``nodes`` nodes of ``cards`` cards, ``workers`` at a time,
    granted as the placement ledger grants (in order; exclusive checks alone, last)."""
    pending = sorted(checks, key=lambda c: c.need == "alone")
    now, running, free = 0.0, [], [cards] * nodes  # running: (end, node, cards, alone)
    while pending or running:
        started = False
        if pending and len(running) < workers:
            check = pending[0]
            alone_running = any(r[3] for r in running)
            if check.need == "alone":
                if not running:
                    heapq.heappush(running, (now + check.seconds, -1, 0, True))
                    pending.pop(0)
                    started = True
            elif not alone_running:
                want = cards if check.need == "all" else int(check.need)
                fits = [i for i, f in enumerate(free) if (f == cards if check.need == "all" else f >= want)]
                if fits:
                    node = min(fits, key=lambda i: free[i])
                    free[node] -= want
                    heapq.heappush(running, (now + check.seconds, node, want, False))
                    pending.pop(0)
                    started = True
        if not started:
            end, node, used, _ = heapq.heappop(running)
            now = end
            if node >= 0:
                free[node] += used
    return now


def lower_bound(checks: list[Check], cards: int) -> float:
    """The least wall time any order could reach on one node of ``cards`` cards: checks
    that run alone and checks over every card exclude each other and every check holding
    cards; the card-holding checks need at least their card-seconds over the node's cards."""
    alone = sum(c.seconds for c in checks if c.need in ("alone", "all"))
    card_seconds = sum(int(c.need) * c.seconds for c in checks if c.need.isdigit())
    return alone + card_seconds / cards


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cluster",
        default="local",
        help="cluster provider, kept up between runs (default local; run once first to warm it)",
    )
    parser.add_argument("--workers", type=int, default=4, help="pytest-xdist workers (default 4)")
    parser.add_argument("--cards", type=int, default=4, help="cards of the GPU node, for the replay (default 4)")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then extra pytest arguments")
    args = parser.parse_args()
    extra = pytest_extra(args.pytest_args)
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        argv = suite_argv(args.cluster, args.workers, junit, keep_cluster=True, extra=extra)
        started = time.monotonic()
        status = subprocess.call(argv, cwd=tmp)
        wall = time.monotonic() - started
        if not junit.is_file():
            print(f"no JUnit XML written (pytest exit {status})", file=sys.stderr)
            return 1
        checks = read_checks(junit)
    if not checks:
        print("no checks ran", file=sys.stderr)
        return 1
    longest = max(checks, key=lambda c: c.seconds)
    total = sum(c.seconds for c in checks)
    print(f"checks run: {len(checks)} (pytest exit {status}, {args.workers} workers)")
    print(f"suite wall time: {wall:.1f} s")
    print(f"sum of check times: {total:.1f} s (a serial run)")
    print(f"longest check: {longest.seconds:.1f} s ({longest.name})")
    print(f"ratio wall/longest: {wall / longest.seconds if longest.seconds else float('inf'):.2f} (target < 2)")
    alone = sum(c.seconds for c in checks if c.need == "alone")
    print(f"checks that run alone: {sum(c.need == 'alone' for c in checks)}, {alone:.1f} s of the wall time")
    bound = lower_bound(checks, args.cards)
    print(
        f"least wall time any order could reach on 1 node x {args.cards} cards: {bound:.1f} s "
        f"= {bound / longest.seconds if longest.seconds else float('inf'):.2f} x the longest check"
    )
    one = replay(checks, 1, args.cards, args.workers)
    two = replay(checks, 2, args.cards, args.workers)
    print(
        f"replay, 1 node x {args.cards} cards: {one:.1f} s; 2 nodes: {two:.1f} s "
        f"(a second node saves {one - two:.1f} s, {100 * (one - two) / one if one else 0:.0f}%)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
