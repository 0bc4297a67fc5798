"""One cluster per run: bringing it up once for several processes, an infrastructure
error shared at once, and the cluster kept or taken down as the options say."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushare_conformance.fixtures.framework import handles
from gpushare_conformance.fixtures.options import SuiteOptions
from gpushare_conformance.fixtures.providers.base import ClusterHandle, InfrastructureError


class _Provider:
    def __init__(self, error: str | None = None) -> None:
        self.ups = self.downs = 0
        self.error = error

    def up(self, progress) -> ClusterHandle:
        self.ups += 1
        if self.error:
            raise InfrastructureError(self.error)
        return ClusterHandle(provider="local", kubeconfig=Path("/k"), kubectl="kubectl", node_names=["vm"])

    def down(self, progress) -> None:
        self.downs += 1


def test_the_second_process_reuses_the_handle_the_first_wrote(tmp_path):
    provider = _Provider()
    first = handles.shared_up(provider, tmp_path, print)
    assert handles.shared_up(provider, tmp_path, print) == first
    assert provider.ups == 1


def test_an_infrastructure_error_bringing_it_up_reaches_the_next_process_at_once(tmp_path):
    provider = _Provider(error="no kubelet")
    for _ in range(2):
        with pytest.raises(InfrastructureError, match="no kubelet"):
            handles.shared_up(provider, tmp_path, print)
    assert provider.ups == 1 and handles.read_handle(tmp_path) is None


@pytest.mark.parametrize("keep, downs", [(False, 1), (True, 0)])
def test_the_cluster_goes_down_unless_kept(keep, downs):
    provider, said = _Provider(), []
    options = SuiteOptions.from_values({"gpushare_cluster": "local", "gpushare_keep_cluster": keep})
    handles.take_down(provider, options, said.append)
    assert provider.downs == downs
    assert said == (["keeping the local cluster (--gpushare-keep-cluster-up)"] if keep else [])
