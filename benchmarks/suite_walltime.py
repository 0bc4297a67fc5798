"""Whole-suite wall time on a warm cluster against the longest single check, as a ratio.

Runs the conformance checks once (the cluster kept warm with --keep-cluster, so
bring-up is not counted; run it once before to warm it), reads each check's duration
from the JUnit XML, and prints: suite wall time, longest check, their ratio (target
under 2), and the sum of all checks (what a fully serial run costs).

    .venv/bin/python benchmarks/suite_walltime.py [--cluster local] [-- extra pytest args]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default="local")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    extra = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        argv = [sys.executable, "-m", "pytest", str(REPO / "conformance"), "-q", "-p", "no:cacheprovider",
                "--cluster", args.cluster, "--keep-cluster-up", "--junitxml", str(junit), *extra]
        started = time.monotonic()
        status = subprocess.call(argv, cwd=REPO)
        wall = time.monotonic() - started
        if not junit.is_file():
            print(f"no JUnit XML written (pytest exit {status})", file=sys.stderr)
            return 1
        cases = [(c.get("classname", "") + "::" + c.get("name", ""), float(c.get("time", 0)))
                 for c in ET.parse(junit).iter("testcase")]
    if not cases:
        print("no checks ran", file=sys.stderr)
        return 1
    name, longest = max(cases, key=lambda c: c[1])
    total = sum(t for _, t in cases)
    print(f"checks: {len(cases)} (pytest exit {status})")
    print(f"suite wall time: {wall:.1f} s")
    print(f"sum of check times: {total:.1f} s")
    print(f"longest check: {longest:.1f} s ({name})")
    print(f"ratio wall/longest: {wall / longest if longest else float('inf'):.2f} (target < 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
