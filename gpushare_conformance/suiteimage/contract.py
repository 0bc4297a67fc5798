"""What a conformance image is told, turned into the suite's pytest command line.

hydrophone starts the conformance container with its image's entrypoint and these
variables: ``E2E_FOCUS``/``E2E_SKIP`` (Ginkgo regular expressions, here
``--gpushare-focus``/``--gpushare-skip``, fixtures/selection.py), ``E2E_EXTRA_ARGS``
(the suite's own options; hydrophone takes only ``--key=value`` words, so a switch is
written ``--gpushare-mock-nvml=true``), ``E2E_EXTRA_GINKGO_ARGS``
(``--procs=N`` becomes ``-n N``, ``-v`` stays ``-v``), ``E2E_DRYRUN`` (list, run
nothing). Results go to ``/tmp/results`` as ``junit_01.xml`` and ``e2e.log``.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

CHECKS_PACKAGE = "gpushare_conformance.conformance"
PROGRESS_PLUGIN = "gpushare_conformance.suiteimage.progress"
JUNIT_FILE = "junit_01.xml"
LOG_FILE = "e2e.log"
_PROCS = re.compile(r"--procs=(\d+)")


class ContractError(ValueError):
    """A variable the image cannot honour; names the variable and its value."""


def pytest_argv(env: Mapping[str, str], results: Path, work: Path) -> list[str]:
    """The pytest command line for the conformance container's environment ``env``,
    writing the JUnit file under ``results`` and everything else under ``work``."""
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        CHECKS_PACKAGE,
        "-p",
        "gpushare_conformance.fixtures.plugin",
        "-p",
        PROGRESS_PLUGIN,
        "-p",
        "no:cacheprovider",
        "-o",
        "junit_family=xunit1",  # the verdicts ride as JUnit properties (pyproject.toml)
        "-ra",
        "--rootdir",
        str(work),
        "--gpushare-cluster",
        "in-cluster",
        "--gpushare-report-dir",
        str(work / "report"),
        "--junitxml",
        str(results / JUNIT_FILE),
    ]
    for variable, option in (("E2E_FOCUS", "--gpushare-focus"), ("E2E_SKIP", "--gpushare-skip")):
        value = env.get(variable, "")
        if value:
            argv += [option, value]
    for word in _split(env, "E2E_EXTRA_GINKGO_ARGS"):
        procs = _PROCS.fullmatch(word)
        if procs and int(procs.group(1)) > 1:
            argv += ["-n", procs.group(1)]
        elif word == "-v":
            argv.append("-v")
    if env.get("E2E_DRYRUN", "").lower() == "true":
        argv.append("--collect-only")
    return argv + [_switch(word) for word in _split(env, "E2E_EXTRA_ARGS")]


def _switch(word: str) -> str:
    """``--flag=true`` as ``--flag``: hydrophone passes only ``--key=value`` words (Go's
    spelling of a boolean flag), the suite's switches take no value."""
    flag, sep, value = word.partition("=")
    if not sep or not flag.startswith("--") or value.lower() not in ("true", "false"):
        return word
    if value.lower() == "false":
        raise ContractError(
            f"E2E_EXTRA_ARGS: {word!r}: the suite's switches are turned on by naming them; leave {flag} out"
        )
    return flag


def _split(env: Mapping[str, str], variable: str) -> list[str]:
    try:
        return shlex.split(env.get(variable, ""))
    except ValueError as exc:
        raise ContractError(f"{variable}: cannot split {env.get(variable)!r} into arguments ({exc})") from None
