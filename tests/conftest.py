"""The test command's three streams, and the fixtures of the tests that switch a
cluster's stack (tests/dra on the local cluster, tests/peers on their own: see
tests/peers/conftest.py): the session's local provider and a way to switch its stack.

The README's test command runs on three pytest-xdist workers: every test of the
session's local cluster is one unit of work, run in order by one worker (they share the
cluster and restart, switch or fill it); the whole suite on kind another, followed on
the same kind cluster by its share of the mutation cases (tests/mutation_shares.py: the
local stream runs the others); the peer flavors on a one-node kind cluster of their own a
third. A worker done with its stream takes the
tests that touch no cluster. So the kind run, the mutation cases, the peers and the
unit tests go on while the local cluster is busy. Without ``-n`` nothing changes.

The local stream runs the tests on the reference stack first, then the tests of each
stack it switches to, together (``@pytest.mark.on_stack``, ON_STACK_ORDER): each stack
is deployed once, and the reference stack comes back once, at the end, when the cluster
stays up. The peers' stream likewise runs each flavor's tests together.
"""

from __future__ import annotations

import os

import mutation_shares
import pytest

from gpushare_conformance.fixtures.framework import stacks
from gpushare_conformance.fixtures.framework.ordering import uses_cluster
from gpushare_conformance.fixtures.framework.progress import progress_printer
from gpushare_conformance.fixtures.framework.timeouts import Timeouts

LOCAL_CLUSTER, KIND_CLUSTER, PEER_CLUSTER = "local-cluster", "kind-cluster", "peer-cluster"
# Where the tests of each cluster live (paths from the repository root). A test that is
# end-to-end or asks for the ``cluster`` fixture anywhere else is refused at collection.
STREAMS = {
    KIND_CLUSTER: ("tests/kind/test_kind_suite.py",),
    LOCAL_CLUSTER: (
        "tests/local/",
        # The local stream's share of the mutation cases (tests/mutation_shares.py; the
        # fault switches beside them need no cluster: any worker runs them).
        mutation_shares.MUTATION,
        "tests/dra/",
        "tests/report/test_allure_html.py",
    ),
    # The peer flavors, on a one-node kind cluster of their own (tests/peers/conftest.py).
    PEER_CLUSTER: ("tests/peers/",),
}


# The stack a test of the local stream switches the cluster to (``@pytest.mark.on_stack``;
# unmarked: the reference stack the cluster starts with). The stream runs the tests of
# each stack together, in this order, so it switches the cluster once per stack.
ON_STACK = "on_stack"
ON_STACK_ORDER = ("reference", "dra", "gpushare-like", "hami-like")


def stack_rank(item: pytest.Item) -> int:
    """Where ``item`` comes in the local stream: after every test of an earlier stack."""
    marker = item.get_closest_marker(ON_STACK)
    name = marker.args[0] if marker else "reference"
    if name not in ON_STACK_ORDER:
        raise pytest.UsageError(f"{item.nodeid}: on_stack({name!r}) names no stack of {ON_STACK_ORDER}")
    return ON_STACK_ORDER.index(name)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{ON_STACK}(name): the stack the test switches the local cluster to (tests/conftest.py ON_STACK_ORDER)",
    )


def stream_of(nodeid: str) -> str | None:
    """The cluster whose stream runs the test ``nodeid`` (None: any worker may run it)."""
    path = nodeid.split("::", 1)[0]
    return next((name for name, paths in STREAMS.items() if path.startswith(paths)), None)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under pytest-xdist: each cluster's tests are one unit of work, run in order by one
    worker; every other test is a unit of its own (xdist's ``loadscope`` over these scopes,
    the largest first)."""
    from xdist.scheduler import LoadScopeScheduling

    class ClusterStreams(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return stream_of(nodeid) or nodeid

    return ClusterStreams(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.args_source is pytest.Config.ArgsSource.TESTPATHS:
        # The test command leaves the mutation cases but the local stream's share to
        # tests/kind (tests/mutation_shares.py); named on the command line, they all run.
        left = {
            item.nodeid
            for item in items
            if mutation_shares.case_of(item.nodeid) not in (None, *mutation_shares.ON_LOCAL)
        }
        if left:
            config.hook.pytest_deselected(items=[item for item in items if item.nodeid in left])
            items[:] = [item for item in items if item.nodeid not in left]
    # The tests of each stack together (a stable sort: within a stack, the files' order).
    items.sort(key=stack_rank)
    for item in items:
        on_a_cluster = item.get_closest_marker("e2e") is not None or uses_cluster(item)
        if on_a_cluster and item.nodeid.startswith("tests/") and stream_of(item.nodeid) is None:
            raise pytest.UsageError(
                f"{item.nodeid} works on a cluster, but no stream of tests/conftest.py (STREAMS) runs its file"
            )


# What the tests' child pytest processes (the whole-suite runs, the mutation cases, the
# CLI's tests) leave out, plugins of this dev environment that no child uses and that
# import a library at every start: hypothesis's (all of hypothesis, about 0.8 s of CPU)
# and pytest-kind's (pykube and requests: a child's start took 0.95 s of CPU with it,
# 0.55 s without), in each of some two hundred children. No child runs a property test
# or a pytest-kind fixture (tests/suite/test_beside_other_plugins.py runs its own
# children beside pytest-kind). The test command's own processes, started before this,
# keep both.
CHILD_PYTEST_ADDOPTS = "-p no:hypothesispytest -p no:pytest-kind"


@pytest.fixture(scope="session", autouse=True)
def children_without_unused_plugins():
    patch = pytest.MonkeyPatch()
    patch.setenv("PYTEST_ADDOPTS", f"{os.environ.get('PYTEST_ADDOPTS', '')} {CHILD_PYTEST_ADDOPTS}".strip())
    yield
    patch.undo()


@pytest.fixture(scope="session")
def provider(cluster):
    if cluster.provider != "local":
        pytest.skip("switching stacks needs the local provider (it restarts the kubelet and kube-scheduler)")
    from gpushare_conformance.fixtures.providers.local import LocalProvider

    return LocalProvider(state_dir=cluster.details["state_dir"])


@pytest.fixture(scope="session")
def stack_switcher(kube, provider, pytestconfig, suite_options):
    """use_stack bound to the session's cluster. The stack stays switched from one test to
    the next (the stream runs each stack's tests together: ON_STACK_ORDER); the reference
    stack comes back at the end when the cluster stays up (a cluster taken down at the
    end needs no stack)."""
    progress = progress_printer(pytestconfig)
    timeouts = Timeouts()

    def use(name: str) -> list[dict]:
        return stacks.use_stack(kube, stacks.LocalStackHost(provider), name, progress, timeouts)

    try:
        yield use
    finally:
        if suite_options.keep_cluster:
            stacks.use_stack(kube, stacks.LocalStackHost(provider), "reference", progress, timeouts)


@pytest.fixture
def switch(stack_switcher, request):
    """Switch the session's local cluster to a stack: the one the test's ``on_stack``
    marker names, so the stream's order (tests of one stack together) holds."""
    marker = request.node.get_closest_marker(ON_STACK)
    named = marker.args[0] if marker else None

    def use(name: str) -> list[dict]:
        if name != named:
            pytest.fail(
                f"{request.node.nodeid} switches to the {name} stack but is marked on_stack({named!r}): "
                f"mark it @pytest.mark.{ON_STACK}({name!r}) so its stream runs it with that stack's tests"
            )
        return stack_switcher(name)

    return use
