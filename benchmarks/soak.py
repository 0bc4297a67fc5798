"""Soak: the whole suite N times in a row, to find flakes.

Each run is a full `pytest --pyargs gpushare_conformance.conformance` (in parallel,
``--workers``) with its own report directory, so every failure keeps its diagnostics
(``<out>/run-<i>/diagnostics/``, JUnit, verdicts.json). By default the runs share one
warm cluster (brought up by the first run, taken down after the last); ``--fresh-cluster``
brings a new one up for every run. Prints runs, passes, failures per check, and the
slowest and median suite time.

    .venv/bin/python benchmarks/soak.py --runs 20 [--fresh-cluster] [--workers 4] [--out reports/soak]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from suite_child import pytest_extra, suite_argv


def failures(junit: Path) -> list[str]:
    if not junit.is_file():
        return ["(no JUnit XML: the run did not finish)"]
    out = []
    for case in ET.parse(junit).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            out.append(case.get("classname", "") + "::" + case.get("name", ""))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="how many suite runs (default 20)")
    parser.add_argument("--fresh-cluster", action="store_true", help="a new cluster for every run")
    parser.add_argument("--workers", type=int, default=4, help="pytest-xdist workers per run (default 4)")
    parser.add_argument("--cluster", default="local", help="cluster provider (default local)")
    parser.add_argument("--out", default="reports/soak", help="where each run's reports go (default reports/soak)")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then extra pytest arguments")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    extra = pytest_extra(args.pytest_args)
    out = Path(args.out).resolve()
    times: list[float] = []
    failed_by_check: collections.Counter[str] = collections.Counter()
    passes = 0
    for i in range(1, args.runs + 1):
        report = out / f"run-{i}"
        report.mkdir(parents=True, exist_ok=True)
        keep = not args.fresh_cluster and i < args.runs
        argv = suite_argv(args.cluster, args.workers, report / "junit.xml", keep_cluster=keep, extra=extra)
        argv += ["--gpushare-report-dir", str(report)]
        started = time.monotonic()
        with open(report / "pytest.log", "w") as log:
            status = subprocess.call(argv, stdout=log, stderr=subprocess.STDOUT, cwd=out)
        times.append(time.monotonic() - started)
        failed = failures(report / "junit.xml") if status else []
        if status == 0:
            passes += 1
        failed_by_check.update(failed or ([] if status == 0 else [f"(pytest exit {status})"]))
        verdict = "pass" if status == 0 else f"FAIL ({', '.join(failed) or f'exit {status}'}; see {report})"
        print(f"run {i}/{args.runs}: {times[-1]:.1f} s, {verdict}", flush=True)
    print(f"runs: {args.runs}, passed: {passes}, failed: {args.runs - passes}")
    print(
        f"suite time: median {statistics.median(times):.1f} s, slowest {max(times):.1f} s, "
        f"fastest {min(times):.1f} s ({'fresh cluster each run' if args.fresh_cluster else 'one warm cluster'}; "
        f"the first run includes bring-up)"
    )
    if failed_by_check:
        print("failures per check:")
        for check, count in failed_by_check.most_common():
            print(f"  {count:3d}  {check}")
    else:
        print("failures per check: none")
    return 0 if passes == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
