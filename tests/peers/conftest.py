"""The peer flavors' own cluster: a one-node kind cluster whose control plane carries
the mock GPUs (4 x V100-SXM2-16GB, as the local cluster's node), made for tests/peers
and deleted after them. The test command runs them in a stream of their own beside
the local cluster's and the kind suite's (tests/conftest.py, STREAMS), so that the two
flavors' whole-suite runs are not added to the local cluster's four.

``switch`` deploys a flavor on it as on the local cluster (framework/stacks.py), its
node reached through ``docker exec`` (providers/kind_node.py): kube-scheduler gets the
flavor's configuration, the kubelet forgets the last flavor's device plugin. The
judged runs reach it as any user's cluster: ``--cluster existing --kubeconfig``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker_users import docker_in_use

from gpushare_conformance.fixtures.framework import stacks
from gpushare_conformance.fixtures.framework.kube import Kube
from gpushare_conformance.fixtures.framework.progress import progress_printer
from gpushare_conformance.fixtures.framework.timeouts import Timeouts
from gpushare_conformance.fixtures.providers.base import ClusterHandle
from gpushare_conformance.fixtures.providers.kind import DEFAULT_INVENTORY, KindProvider
from gpushare_conformance.fixtures.providers.kind_node import KindStackHost

REPO = Path(__file__).resolve().parents[2]
PEER_CLUSTER = "gpushare-peers"


@pytest.fixture(scope="session")
def peer_kind(pytestconfig: pytest.Config) -> Iterator[tuple[KindProvider, ClusterHandle]]:
    """The one-node kind cluster, from nothing (one left by an interrupted run is
    deleted first), without a stack; deleted at the end, and then nothing of it may be left."""
    progress = progress_printer(pytestconfig)
    built = subprocess.run(
        ["bash", "ci/kind/build-kind.sh"], cwd=REPO, capture_output=True, text=True, timeout=1200, check=False
    )
    assert built.returncode == 0, f"ci/kind/build-kind.sh failed:\n{built.stderr[-2000:]}"
    kind_binary = built.stdout.strip().splitlines()[-1]
    with docker_in_use():
        provider = KindProvider(
            cluster_name=PEER_CLUSTER,
            kind_binary=kind_binary,
            worker_inventories=[DEFAULT_INVENTORY],
            gpu_control_plane=True,
            deploy_stack=False,
        )
        provider.down(progress)
        try:
            yield provider, provider.up(progress)
        finally:
            left = provider.down(progress)
            assert not left, f"kind cluster {PEER_CLUSTER} left: {left}"


@pytest.fixture(scope="session")
def cluster(peer_kind) -> ClusterHandle:
    return peer_kind[1]


@pytest.fixture(scope="session")
def kube(cluster) -> Kube:
    # Through ``cluster``: a test using it is one of the cluster's (framework/ordering.py).
    return Kube(cluster)


@pytest.fixture(scope="session")
def stack_switcher(peer_kind, kube, pytestconfig):
    """use_stack bound to the peers' cluster (the ``switch`` fixture of tests/conftest.py
    checks each test's on_stack marker)."""
    host, progress, timeouts = KindStackHost(peer_kind[0]), progress_printer(pytestconfig), Timeouts()
    return lambda name: stacks.use_stack(kube, host, name, progress, timeouts)
