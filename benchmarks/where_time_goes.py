"""Where the test command's time goes, from its JUnit file.

`.ci/run` writes ``reports/test-command/junit.xml``. This prints the time per test
folder (tests/peers, tests/dra, conformance, ...: each of the whole-suite runs is one
folder), the time of each of the test command's streams (tests/conftest.py: the local
cluster's tests run in order by one pytest-xdist worker, the kind run and everything
else beside them, so the longest stream bounds the wall time) and the slowest tests, so
the biggest items are attacked first. Times are pytest's per test (set-up and tear-down
included), so the folders add up to the serial time, not the wall time; the JUnit
testsuite's own time is the wall time.

    .venv/bin/python benchmarks/where_time_goes.py [reports/test-command/junit.xml] [--top 25]
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import stream_of  # noqa: E402  (tests/conftest.py: which stream runs a test)


def folder_of(classname: str) -> str:
    """``tests.peers.test_peers.TestX`` -> ``tests/peers``; ``conformance.test_x`` -> ``conformance``."""
    parts = classname.split(".")
    if parts[0] == "tests" and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit", nargs="?", default="reports/test-command/junit.xml", help="the JUnit file")
    parser.add_argument("--top", type=int, default=25, help="how many of the slowest tests to list (default 25)")
    args = parser.parse_args(argv)
    path = Path(args.junit)
    if not path.is_file():
        print(f"error: {path}: no such file (run `bash .ci/run` first)", file=sys.stderr)
        return 2
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    wall = float(suite.get("time", 0)) if suite is not None else 0.0
    per_folder: dict[str, list[float]] = defaultdict(list)
    per_stream: dict[str, float] = defaultdict(float)
    tests: list[tuple[float, str]] = []
    for case in root.iter("testcase"):
        seconds = float(case.get("time", 0))
        classname = case.get("classname", "")
        per_folder[folder_of(classname)].append(seconds)
        per_stream[stream_of(classname.replace(".", "/") + ".py") or "no cluster"] += seconds
        tests.append((seconds, f"{classname}::{case.get('name', '')}"))
    serial = sum(t for t, _ in tests)
    print(f"wall {wall:.0f} s, serial {serial:.0f} s, {len(tests)} tests")
    print(f"{'folder':<22} {'tests':>6} {'seconds':>8} {'share':>6}")
    for folder, times in sorted(per_folder.items(), key=lambda kv: -sum(kv[1])):
        print(f"{folder:<22} {len(times):>6} {sum(times):>8.0f} {100 * sum(times) / max(serial, 1):>5.1f}%")
    print("\nstreams (each runs in order on one worker; the tests of no cluster fill the workers done):")
    for stream, seconds in sorted(per_stream.items(), key=lambda kv: -kv[1]):
        print(f"{stream:<22} {seconds:>8.0f} s")
    print(f"\nslowest {args.top}:")
    for seconds, name in sorted(tests, reverse=True)[: args.top]:
        print(f"{seconds:>8.0f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
