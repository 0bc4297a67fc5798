"""The cluster handle the run's processes share (pytest-xdist workers read what the
controller wrote): every field comes back as it was, paths as paths."""

from __future__ import annotations

from pathlib import Path

from gpushare_conformance.fixtures.framework.handles import read_handle, write_handle
from gpushare_conformance.fixtures.providers.base import ClusterHandle


def test_a_handle_comes_back_from_the_run_directory_as_written(tmp_path):
    handle = ClusterHandle(
        provider="local",
        kubeconfig=Path("/var/lib/gpushare-conformance/local/kubeconfig"),
        kubectl="/usr/bin/kubectl",
        node_names=["vm"],
        node_inventories={"vm": Path("/etc/gpushare/inventory.yaml")},
        details={"state_dir": "/var/lib/gpushare-conformance/local"},
    )
    assert read_handle(tmp_path) is None
    write_handle(tmp_path, handle)
    assert read_handle(tmp_path) == handle


def test_a_handle_written_before_node_inventories_existed_reads_with_none(tmp_path):
    (tmp_path / "cluster.json").write_text(
        '{"provider": "kind", "kubeconfig": "/k", "kubectl": "kubectl", "context": null, "mocked_nvml": true, '
        '"stack_deployed": false, "node_names": [], "details": {}}'
    )
    assert read_handle(tmp_path).node_inventories == {}
