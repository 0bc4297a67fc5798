"""`gpushare-conformance run`: run the conformance checks and print the verdict.

Runs pytest on the checks' package (``--pyargs gpushare_conformance.conformance``) in a
child process (so Ctrl-C reaches pytest and its clean-up runs), writing JUnit XML,
allure results and the suite's verdicts into the report directory, then prints, from
``verdicts.json``, one line per rule of the seed (``--verdicts all``: every verdict as a
table first). The exit status says which of conforms, a rule failed, a usage error or an
infrastructure error it was (``exitcodes.py``): an infrastructure error prints one
message and no table, since nothing was judged. ``--cluster existing`` is checked
before pytest starts: an unusable kubeconfig or an unreachable API server stops the run
at once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from gpushare_conformance import ai_conformance, exitcodes, summary
from gpushare_conformance.profiles import PROFILES
from gpushare_conformance.report import VERDICTS_FILE, ReportError, read_verdicts, render_table, report_name

CHECKS_PACKAGE = "gpushare_conformance.conformance"
CLUSTERS = ("local", "kind", "existing", "in-cluster")
# Another DRA driver's spelling of a share (--stack dra): option -> what it names.
DRA_OPTIONS = {
    "device-class": "the DeviceClass claims ask cards from (default gpu.gpushare.conformance.io; NVIDIA's: gpu.nvidia.com)",
    "capacity": "the device capacity holding a card's memory (default memory)",
    "attribute": "the device attribute telling cards apart, <domain>/<name> (default <driver>/uuid)",
    "driver": "the driver publishing the class's devices (default: the attribute's domain)",
}


def _workers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--workers: expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--workers: must be at least 1, got {value}")
    return value


def pytest_argv(args: argparse.Namespace) -> list[str]:
    """The pytest command line for ``args`` (extra pytest arguments go last)."""
    report_dir = Path(args.report_dir)
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        CHECKS_PACKAGE,
        "-p",
        "no:cacheprovider",
        "--gpushare-cluster",
        args.cluster,
        "--gpushare-stack",
        args.stack,
        "--gpushare-report-dir",
        str(report_dir),
        "--junitxml",
        str(report_dir / "junit.xml"),
        "--alluredir",
        str(report_dir / "allure-results"),
        "--clean-alluredir",
        # run prints the summary itself, after pytest's last line
        "--gpushare-verdict-summary",
        "off",
    ]
    if args.kubeconfig:
        argv += ["--gpushare-cluster-kubeconfig", args.kubeconfig]
    if args.context:
        argv += ["--gpushare-context", args.context]
    if args.keep_cluster:
        argv += ["--gpushare-keep-cluster-up"]
    if args.kind_binary:
        argv += ["--gpushare-kind-binary", args.kind_binary]
    if getattr(args, "kind_cluster", None):
        argv += ["--gpushare-kind-cluster", args.kind_cluster]
    if getattr(args, "kubernetes_version", None):
        argv += ["--gpushare-kubernetes-version", args.kubernetes_version]
    if getattr(args, "image_registry", None):
        argv += ["--gpushare-image-registry", args.image_registry]
    for name in DRA_OPTIONS:
        value = getattr(args, f"dra_{name.replace('-', '_')}", None)
        if value is not None:
            argv += [f"--gpushare-dra-{name}", value]
    log_level = getattr(args, "log_level", None)
    if log_level:
        argv += ["--log-level", log_level]  # pytest's own: the level its log capture and reports keep
    workers = getattr(args, "workers", 1)
    if workers and workers > 1:
        argv += ["-n", str(workers)]
    extra = list(args.pytest_args or [])
    if extra and extra[0] == "--":
        extra = extra[1:]
    return argv + extra


KUBERNETES_VERSION_HELP = (
    "Kubernetes release of the local cluster: a minor (1.35, 1.36, 1.37) or its served patch release (v1.37.2); "
    "built from the Go module proxy once and cached; a running cluster of another release is replaced "
    "(default: the newest served, 1.37)"
)


def preflight(args: argparse.Namespace) -> int | None:
    """Check what can be checked before pytest starts; an exit status when the run
    cannot go on (the error printed, one line), else None.

    ``--cluster existing``: the kubeconfig must name a server and the server must
    answer (kubectl would quietly try http://localhost:8080 for an empty kubeconfig,
    and every check would fail on it)."""
    if args.cluster != "existing":
        return None
    from gpushare_conformance.fixtures.providers.base import InfrastructureError
    from gpushare_conformance.fixtures.providers.existing import check_reachable, default_kubeconfig

    kubeconfig = Path(args.kubeconfig).expanduser() if args.kubeconfig else default_kubeconfig()
    if not kubeconfig.is_file():
        print(f"error: --kubeconfig: file not found: {kubeconfig}", file=sys.stderr)
        return exitcodes.USAGE
    try:
        check_reachable(kubeconfig, args.context)
    except InfrastructureError as exc:
        print(f"infrastructure error, nothing judged: {exc}", file=sys.stderr)
        return exitcodes.INFRASTRUCTURE
    return None


def _run(args: argparse.Namespace) -> int:
    if args.ai_evidence and not Path(args.ai_evidence).expanduser().resolve().parent.is_dir():
        print(f"error: --ai-evidence {args.ai_evidence}: its directory does not exist", file=sys.stderr)
        return exitcodes.USAGE
    stopped = preflight(args)
    if stopped is not None:
        return stopped
    report_dir = Path(args.report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    # A table left by an earlier run must not pass for this one's.
    (report_dir / "verdicts.json").unlink(missing_ok=True)
    argv = pytest_argv(args)
    print("+ " + " ".join(argv), file=sys.stderr)
    status = _run_to_the_end(argv)
    try:
        result = read_verdicts(report_dir / VERDICTS_FILE)
    except ReportError as exc:
        print(f"no verdicts: {exc}", file=sys.stderr)
        code = exitcodes.from_pytest(status)
        return exitcodes.INTERNAL if code == exitcodes.CONFORMS else code
    infrastructure = summary.infrastructure_error(result)
    if infrastructure is not None:
        # Nothing was judged: one message, no table of rules that did not run.
        print(f"infrastructure error, nothing judged: {infrastructure}", file=sys.stderr)
        return exitcodes.INFRASTRUCTURE
    lines = summary.build_summary(result)
    if summary.nothing_judged(lines):
        # Checks ran but none could judge its rule (e.g. every exec refused): one message.
        why = next((line.figure for line in lines if line.figure.startswith(summary.NOT_JUDGED)), "no check ran")
        print(f"no rule could be judged: {why.removeprefix(summary.NOT_JUDGED)}", file=sys.stderr)
        return exitcodes.INFRASTRUCTURE
    print(render_verdicts(result, args.verdicts, report_dir))
    if args.ai_evidence:
        evidence = ai_conformance.evidence_summary(lines, result.facts, report_dir)
        Path(args.ai_evidence).write_text(ai_conformance.render_evidence(evidence))
        print(f"AI conformance evidence summary: {args.ai_evidence}")
    return exitcodes.from_pytest(status)


def _colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def render_verdicts(result, mode: str, report_dir: Path, colour: bool | None = None, width: int | None = None) -> str:
    """What ``run`` prints at the end: the full table (``all``), then the rule summary
    and where the reports are."""
    colour = _colour() if colour is None else colour
    explicit_width = width is not None
    # A terminal's width; a log (CI, a pipe) gets the whole figures.
    width = width or (shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 160)
    results = report_dir / "allure-results"
    out = [""]
    if mode == "all":
        out += [render_table(result.records, width=width, colour=colour), ""]
    hint = (
        "" if mode == "all" else f"full list: gpushare-conformance run --verdicts all, or {report_dir / VERDICTS_FILE}"
    )
    # Not a terminal (a log, a pipe): the rule lines whole, never cut with an ellipsis.
    cut = width if sys.stdout.isatty() or explicit_width else None
    out.append(summary.render_text(result, width=cut, colour=colour, full_list=hint))
    out.append(ai_conformance.footer(summary.build_summary(result)))
    name = report_name(result.facts)
    out.append(
        f"reports: {report_dir / 'junit.xml'}, {results} (HTML: npx allure generate {results} "
        f"-o {report_dir / 'allure-report'} --report-name '{name}')"
    )
    return "\n".join(out)


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
                return exitcodes.INTERRUPTED
            print("interrupted: waiting for pytest to clean up (Ctrl-C twice more to kill it)", file=sys.stderr)
            try:
                child.send_signal(signal.SIGINT)
            except ProcessLookupError:
                pass


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run the conformance checks and print the verdict, one line per seed rule",
        epilog=exitcodes.EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the conformance checks (pytest on the conformance package) and print a verdict table. "
        "Arguments after -- go to pytest unchanged, e.g. -- -m seed -x --gpushare-timeout pod_start=600.",
    )
    parser.add_argument(
        "--cluster",
        choices=CLUSTERS,
        default="local",
        help="cluster provider: local (default; binaries on this host), kind, existing, or in-cluster "
        "(from a pod, with its service account: the suite image, docs/in-cluster.md)",
    )
    parser.add_argument(
        "--stack",
        choices=tuple(PROFILES),
        default="reference",
        help="stack profile to check (default reference); dra: a DRA driver sharing cards by a memory "
        "capacity (the local cluster switches to this project's DRA driver)",
    )
    for name, what in DRA_OPTIONS.items():
        parser.add_argument(
            f"--dra-{name}",
            default=None,
            metavar="NAME",
            help=f"with --stack dra: {what} (pytest: --gpushare-dra-{name})",
        )
    parser.add_argument(
        "--report-dir",
        default="reports",
        help="where JUnit XML, allure results and verdicts.json go (default ./reports)",
    )
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig for --cluster existing or kind")
    parser.add_argument("--context", default=None, help="kubeconfig context for --cluster existing or kind")
    parser.add_argument(
        "--keep-cluster",
        action="store_true",
        help="leave the local or kind cluster running afterwards (pytest: --gpushare-keep-cluster-up)",
    )
    parser.add_argument("--kind-binary", default=None, help="kind binary for --cluster kind (default: kind on PATH)")
    parser.add_argument(
        "--kind-cluster",
        default=None,
        metavar="NAME",
        help="with --cluster kind: the kind cluster's name (default gpushare-conformance; pytest: --gpushare-kind-cluster)",
    )
    parser.add_argument(
        "--image-registry",
        default=None,
        metavar="REGISTRY",
        help="with --cluster existing: the checks' pods and the stack deployed by -- --gpushare-deploy-stack "
        "pull REGISTRY/gpushare-conformance/<name>:<tag> (push them first: images push REGISTRY; "
        "docs/registry.md; pytest: --gpushare-image-registry)",
    )
    parser.add_argument(
        "--kubernetes-version",
        default=None,
        metavar="VERSION",
        help=KUBERNETES_VERSION_HELP.replace("of the local cluster", "of the local or kind cluster"),
    )
    parser.add_argument(
        "--workers",
        type=_workers,
        default=4,
        help="checks run in parallel by this many pytest-xdist workers on one cluster, placed on "
        "cards no concurrent check uses (default 4; 1 runs them one after another)",
    )
    parser.add_argument(
        "--verdicts",
        choices=("rules", "all"),
        default="rules",
        help="at the end print one line per seed rule (rules, default), or every verdict as a table "
        "and then the rules (all)",
    )
    parser.add_argument(
        "--ai-evidence",
        default=None,
        metavar="FILE",
        help="also write the CNCF Kubernetes AI Conformance evidence summary this run gives (gpu_sharing, "
        "secure_accelerator_access, driver_runtime_management: status, evidence, notes per requirement, "
        f"in the shape of the {ai_conformance.CHECKLIST_VERSION} checklist) to FILE, as YAML",
    )
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then arguments passed to pytest")
    parser.set_defaults(func=_run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpushare-conformance")
    register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)
