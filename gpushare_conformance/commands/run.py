"""`gpushare-conformance run`: run the conformance checks and print the verdict table.

Runs pytest on the checks' package (``--pyargs gpushare_conformance.conformance``) in a
child process (so Ctrl-C reaches
pytest and its clean-up runs), writing JUnit XML, allure results and the suite's
verdicts into the report directory, then prints the table of what each check expected
and observed. The exit status is pytest's.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from gpushare_conformance.profiles import PROFILES
from gpushare_conformance.report import ReportError, read_verdicts, render_table

CHECKS_PACKAGE = "gpushare_conformance.conformance"
CLUSTERS = ("local", "kind", "existing")


def pytest_argv(args: argparse.Namespace) -> list[str]:
    """The pytest command line for ``args`` (extra pytest arguments go last)."""
    report_dir = Path(args.report_dir)
    argv = [
        sys.executable, "-m", "pytest", "--pyargs", CHECKS_PACKAGE,
        "-p", "no:cacheprovider",
        "--cluster", args.cluster,
        "--stack", args.stack,
        "--report-dir", str(report_dir),
        "--junitxml", str(report_dir / "junit.xml"),
        "--alluredir", str(report_dir / "allure-results"),
        "--clean-alluredir",
    ]
    if args.kubeconfig:
        argv += ["--cluster-kubeconfig", args.kubeconfig]
    if args.context:
        argv += ["--context", args.context]
    if args.keep_cluster:
        argv += ["--keep-cluster-up"]
    if args.kind_binary:
        argv += ["--kind-binary", args.kind_binary]
    extra = list(args.pytest_args or [])
    if extra and extra[0] == "--":
        extra = extra[1:]
    return argv + extra


def _run(args: argparse.Namespace) -> int:
    report_dir = Path(args.report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    # A table left by an earlier run must not pass for this one's.
    (report_dir / "verdicts.json").unlink(missing_ok=True)
    argv = pytest_argv(args)
    print("+ " + " ".join(argv), file=sys.stderr)
    status = _run_to_the_end(argv)
    try:
        records, outcomes = read_verdicts(report_dir / "verdicts.json")
    except ReportError as exc:
        print(f"no verdict table: {exc}", file=sys.stderr)
        return status or 1
    print()
    print(render_table(records))
    counts: dict[str, int] = {}
    for outcome in outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    print("checks: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "none ran"))
    print(f"reports: {report_dir / 'junit.xml'}, {report_dir / 'allure-results'} "
          f"(HTML: allure generate {report_dir / 'allure-results'} -o {report_dir / 'allure-report'})")
    return status


def _run_to_the_end(argv: list[str]) -> int:
    """Run pytest; on Ctrl-C let it clean up (namespaces, cluster) instead of killing it.

    pytest runs in a process group of its own, so a terminal's Ctrl-C reaches this
    process only and is passed on once (two SIGINTs would cut pytest's clean-up short).
    A second Ctrl-C passes on again; only a third kills pytest.
    """
    child = subprocess.Popen(argv, process_group=0)
    interrupts = 0
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            interrupts += 1
            if interrupts >= 3:
                print("third interrupt: killing pytest without clean-up", file=sys.stderr)
                child.kill()
                child.wait()
                return 130
            print("interrupted: waiting for pytest to clean up (Ctrl-C twice more to kill it)", file=sys.stderr)
            try:
                child.send_signal(signal.SIGINT)
            except ProcessLookupError:
                pass


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run the conformance checks and print the verdict table",
        description="Run the conformance checks (pytest on the conformance package) and print a verdict table. "
                    "Arguments after -- go to pytest unchanged, e.g. -- -m seed -x.",
    )
    parser.add_argument("--cluster", choices=CLUSTERS, default="local",
                        help="cluster provider: local (default; binaries on this host), kind, or existing")
    parser.add_argument("--stack", choices=tuple(PROFILES), default="reference",
                        help="stack profile to check (default reference)")
    parser.add_argument("--report-dir", default="reports",
                        help="where JUnit XML, allure results and verdicts.json go (default ./reports)")
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig for --cluster existing or kind")
    parser.add_argument("--context", default=None, help="kubeconfig context for --cluster existing or kind")
    parser.add_argument("--keep-cluster", action="store_true",
                        help="leave the local or kind cluster running afterwards (pytest: --keep-cluster-up)")
    parser.add_argument("--kind-binary", default=None, help="kind binary for --cluster kind (default: kind on PATH)")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then arguments passed to pytest")
    parser.set_defaults(func=_run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpushare-conformance")
    register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)
