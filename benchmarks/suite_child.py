"""The child pytest the suite benchmarks run: the installed conformance checks in
parallel on one cluster, as `gpushare-conformance run` would, with a JUnit file."""

from __future__ import annotations

import sys
from pathlib import Path


def suite_argv(cluster: str, workers: int, junit: Path, keep_cluster: bool, extra: list[str]) -> list[str]:
    """``python -m pytest`` over ``gpushare_conformance.conformance`` with ``workers``
    pytest-xdist workers; ``keep_cluster`` leaves the cluster up for the next run."""
    return [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "gpushare_conformance.conformance",
        "-q",
        "-p",
        "no:cacheprovider",
        "-n",
        str(workers),
        "--gpushare-cluster",
        cluster,
        "--junitxml",
        str(junit),
        *(["--gpushare-keep-cluster-up"] if keep_cluster else []),
        *extra,
    ]


def pytest_extra(remainder: list[str]) -> list[str]:
    """The pytest arguments given after ``--``."""
    return remainder[1:] if remainder[:1] == ["--"] else remainder
