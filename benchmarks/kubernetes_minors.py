"""The main job on each supported Kubernetes minor: one line per minor.

For each minor (default: every supported one, fixtures/providers/versions.py) it runs
``gpushare-conformance run --kubernetes-version M`` on the local cluster, which builds
that release once (cached) and replaces a running cluster of another release, and
prints the rules that passed, those that did not, the checks' outcome and the wall time
(bring-up of that release's cluster included; its first build is not, it is timed
apart). The cluster is left running on the last minor.

    .venv/bin/python benchmarks/kubernetes_minors.py [--minor 1.36 ...] [--report-root DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpushare_conformance.fixtures.providers.versions import SUPPORTED, resolve  # noqa: E402
from gpushare_conformance.report import read_verdicts  # noqa: E402
from gpushare_conformance.summary import build_summary  # noqa: E402


def build(version: str) -> float:
    """Build (or find cached) the release's binaries; seconds it took."""
    started = time.monotonic()
    result = subprocess.run(
        ["bash", str(REPO / "ci" / "build-kubernetes.sh")],
        env={**os.environ, "K8S_VERSION": version},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"ci/build-kubernetes.sh for {version} failed:\n{result.stderr[-3000:]}")
    return time.monotonic() - started


def run_minor(minor: str, report_dir: Path) -> tuple[int, float, str]:
    """Exit status, wall seconds and the rule tally of the main job on ``minor``."""
    started = time.monotonic()
    result = subprocess.run(
        [
            str(REPO / ".venv" / "bin" / "gpushare-conformance"),
            "run",
            "--kubernetes-version",
            minor,
            "--keep-cluster",
            "--report-dir",
            str(report_dir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    wall = time.monotonic() - started
    (report_dir / "run.log").parent.mkdir(parents=True, exist_ok=True)
    (report_dir / "run.log").write_text(result.stdout)
    verdicts = report_dir / "verdicts.json"
    if not verdicts.exists():
        return result.returncode, wall, "no verdicts (see run.log)"
    verdict_file = read_verdicts(verdicts)
    tally = Counter(line.status for line in build_summary(verdict_file))
    checks = Counter(o.outcome for o in verdict_file.outcomes.values())
    version = verdict_file.facts.get("kubernetes", "?")
    rules = ", ".join(f"{n} {status}" for status, n in sorted(tally.items()))
    outcomes = ", ".join(f"{n} {o}" for o, n in sorted(checks.items()))
    return result.returncode, wall, f"{version}: rules {rules}; checks {outcomes}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--minor",
        action="append",
        default=None,
        help="a minor to run (repeatable; default: every supported one, " + ", ".join(r.minor for r in SUPPORTED) + ")",
    )
    parser.add_argument("--report-root", default="reports/minors", help="one report directory per minor below it")
    args = parser.parse_args(argv)
    minors = [resolve(m, "--minor").minor for m in args.minor] if args.minor else [r.minor for r in SUPPORTED]
    print(f"{'minor':<6} {'exit':>4} {'build s':>8} {'run s':>7}  result", flush=True)
    worst = 0
    for minor in minors:
        built = build(resolve(minor).version)
        code, wall, result = run_minor(minor, Path(args.report_root) / minor)
        worst = max(worst, code)
        print(f"{minor:<6} {code:>4} {built:>8.0f} {wall:>7.0f}  {result}", flush=True)
    return worst


if __name__ == "__main__":
    sys.exit(main())
