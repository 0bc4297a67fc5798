"""The whole suite on a multi-node kind cluster built on this machine.

Runs, as a user would, ``pytest conformance --gpushare-cluster kind`` in child processes
(the two-GPU-node checks first, then the rest on four pytest-xdist workers): the
real kind binary (``ci/kind/build-kind.sh``) creates a control plane and two GPU
workers (4 x V100-SXM2-16GB and 2 x T4, mock driver) from the node image this project
builds (``gpushare-conformance images build --kind-node``), in Docker started by
``ci/docker-service.sh``. The children must pass. Then, on the same cluster, the kind
cluster's share of the mutation cases (all but the local stream's,
tests/mutation_shares.py, in a child with
``--gpushare-cluster kind``; the ``cards-across-nodes`` fault needs its two GPU nodes)
must be caught, and afterwards
``kind get clusters`` must not list the cluster and no container of it may be left.
Docker that cannot be started is a failure, not a skip.

    .venv/bin/python -m pytest tests/kind -q -p no:cacheprovider
"""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import mutation_shares
import pytest
from docker_users import docker_in_use
from judged_runs import unplaced_checks

pytestmark = [pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
CLUSTER = "gpushare-conformance"  # the kind provider's default name
CHILD_TIMEOUT_S = 2400


def _run(argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False)


def _pytest_child(argv: list[str]) -> subprocess.CompletedProcess:
    """A child pytest run from the repository, its output (stdout and stderr) kept."""
    return subprocess.run(
        argv,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )


def _junit_counts(path: Path) -> tuple[ET.Element, dict[str, int]]:
    """The child's test suite element and its tests/failures/errors/skipped counts."""
    suite = ET.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    return suite, {k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")}


@pytest.fixture(scope="module")
def docker_daemon():
    """Docker for kind: started by ci/docker-service.sh when not running, stopped
    again after its last user (tests/peers runs a kind cluster beside this one) and
    then nothing of it may be left (tests/docker_users.py)."""
    with docker_in_use():
        yield


@pytest.fixture(scope="module")
def kind_binary() -> str:
    result = _run(["bash", "ci/kind/build-kind.sh"], timeout=1200)
    assert result.returncode == 0, f"ci/kind/build-kind.sh failed:\n{result.stderr[-2000:]}"
    return result.stdout.strip().splitlines()[-1]


def _cluster_containers() -> list[str]:
    out = _run(["docker", "ps", "-a", "--filter", f"label=io.x-k8s.kind.cluster={CLUSTER}", "--format", "{{.Names}}"])
    return out.stdout.split()


@pytest.fixture(scope="module")
def kind_cluster_name(docker_daemon, kind_binary):
    """The kind cluster's name: started from nothing (a cluster left by an interrupted
    run is deleted), kept between this module's tests (the suite keeps it up for the
    mutation case), and deleted at the end whatever happened."""
    if CLUSTER in _run([kind_binary, "get", "clusters"]).stdout.split():
        _run([kind_binary, "delete", "cluster", "--name", CLUSTER], timeout=300)
    yield CLUSTER
    if CLUSTER in _run([kind_binary, "get", "clusters"]).stdout.split():
        _run([kind_binary, "delete", "cluster", "--name", CLUSTER], timeout=300)


MULTINODE = "conformance/test_multinode.py"
MUTATION = mutation_shares.MUTATION


def _conformance_child(kind_binary: str, out: Path, *selection: str) -> tuple[subprocess.CompletedProcess, Path]:
    """``pytest <selection> --gpushare-cluster kind`` in a child, the cluster kept up."""
    junit = out / "junit.xml"
    argv = [
        sys.executable,
        "-m",
        "pytest",
        *selection,
        "-q",
        "-p",
        "no:cacheprovider",
        "--gpushare-cluster",
        "kind",
        "--gpushare-kind-binary",
        kind_binary,
        "--gpushare-keep-cluster-up",
        "--gpushare-report-dir",
        str(out / "reports"),
        "--junitxml",
        str(junit),
    ]
    return _pytest_child(argv), junit


def test_suite_passes_on_kind_with_two_gpu_workers(kind_cluster_name, kind_binary, tmp_path, record_property):
    """First the two-GPU-node checks in one process (it creates the cluster and deploys
    the stack, its progress on the terminal), then every other check on four workers on
    that cluster, as ``gpushare-conformance run --cluster kind`` runs them."""
    (first := tmp_path / "multinode").mkdir()
    result, junit = _conformance_child(kind_binary, first, MULTINODE)
    tail = result.stdout[-6000:]
    ready = re.search(r"kind: (\d+) nodes Ready ([\d.]+)s after `kind create cluster` started", result.stdout)
    if ready:
        record_property("kind_nodes", ready.group(1))
        record_property("kind_create_to_ready_s", ready.group(2))
    assert ready and ready.group(1) == "3", f"the kind cluster did not come up with 3 Ready nodes:\n{tail}"
    assert re.search(r"advertise aliyun\.com/gpu-mem", result.stdout), f"no GPU worker advertised memory:\n{tail}"
    suite, counts = _junit_counts(junit)
    assert result.returncode == 0 and counts["failures"] == counts["errors"] == 0, f"{counts}\n{tail}"
    ran = [c.get("name") for c in suite.iter("testcase") if c.find("skipped") is None]
    assert len(ran) == 2, f"the two-GPU-node checks did not both run on kind: {ran}\n{tail}"

    (rest := tmp_path / "parallel").mkdir()
    result, junit = _conformance_child(kind_binary, rest, "conformance", "--ignore", MULTINODE, "-n", "4")
    tail = result.stdout[-6000:]
    suite, counts = _junit_counts(junit)
    record_property("kind_suite_counts", str(counts))
    print(f"kind suite: {counts} besides the two-node checks; create to Ready {ready.group(2)} s")
    assert result.returncode == 0 and counts["failures"] == counts["errors"] == 0, f"{counts}\n{tail}"
    assert counts["tests"] - counts["skipped"] > 10, f"too few checks ran on kind: {counts}\n{tail}"
    unplaced = unplaced_checks(suite)
    assert not unplaced, f"checks run without a placement: {unplaced}\n{tail}"


def test_checks_catch_the_kind_share_of_the_faults(kind_cluster_name, kind_binary, tmp_path):
    """The kind cluster's share of the mutation cases (every case but the local stream's,
    tests/mutation_shares.py; among them the one that needs two GPU nodes), on the cluster
    the suite left up, each caught. The child takes the cluster down at its end (no
    --gpushare-keep-cluster-up), as a user's run would."""
    child = [
        sys.executable,
        "-m",
        "pytest",
        MUTATION,
        *(f"--deselect={nodeid}" for nodeid in mutation_shares.local_share()),
        "-q",
        "-s",
        "-p",
        "no:cacheprovider",
        "--gpushare-cluster",
        "kind",
        "--gpushare-kind-binary",
        kind_binary,
        "--junitxml",
        str(tmp_path / "junit.xml"),
    ]
    result = _pytest_child(child)
    tail = result.stdout[-6000:]
    suite, counts = _junit_counts(tmp_path / "junit.xml")
    overlays = mutation_shares.mutation_faults()
    share = sorted(set(overlays) - mutation_shares.ON_LOCAL)
    ran = sorted(mutation_shares.case_of(f"{MUTATION}::{c.get('name')}") for c in suite.iter("testcase"))
    assert ran == share, f"the mutation cases that ran on kind are not its share: {ran} != {share}\n{tail}"
    assert result.returncode == 0 and counts["failures"] == counts["errors"] == counts["skipped"] == 0, (
        f"mutation cases on kind: {counts}\n{tail}"
    )
    caught = sorted(set(re.findall(r"--fault (\S+) caught by ", result.stdout)))
    assert caught == share, f"faults no check reported catching: {sorted(set(share) - set(caught))}\n{tail}"
    print(f"{len(caught)} faults caught on kind")
    clusters = _run([kind_binary, "get", "clusters"]).stdout.split()
    assert CLUSTER not in clusters, f"kind still lists {CLUSTER} after the run: {clusters}"
    assert _cluster_containers() == [], f"containers of {CLUSTER} left: {_cluster_containers()}"
