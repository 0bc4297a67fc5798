"""Fixtures of the tests that switch the local cluster's stack (tests/peers, tests/dra):
the session's local provider and a way to switch its stack."""

from __future__ import annotations

import pytest

from gpushare_conformance.fixtures.framework import stacks
from gpushare_conformance.fixtures.framework.progress import progress_printer
from gpushare_conformance.fixtures.framework.timeouts import Timeouts


@pytest.fixture(scope="module")
def provider(cluster):
    if cluster.provider != "local":
        pytest.skip("switching stacks needs the local provider (it restarts the kubelet and kube-scheduler)")
    from gpushare_conformance.fixtures.providers.local import LocalProvider

    return LocalProvider(state_dir=cluster.details["state_dir"])


@pytest.fixture(scope="module")
def switch(kube, provider, pytestconfig):
    """use_stack bound to the session's cluster; the reference stack comes back at the end."""
    progress = progress_printer(pytestconfig)
    timeouts = Timeouts()

    def use(name: str) -> list[dict]:
        return stacks.use_stack(kube, provider, name, progress, timeouts)

    try:
        yield use
    finally:
        stacks.use_stack(kube, provider, "reference", progress, timeouts)
