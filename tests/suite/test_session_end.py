"""At session end the controller sweeps the run's namespaces once, before the cluster goes down."""

from __future__ import annotations

from types import SimpleNamespace

from gpushare_conformance.fixtures import plugin
from gpushare_conformance.fixtures.framework import handles
from gpushare_conformance.fixtures.options import SuiteOptions
from gpushare_conformance.fixtures.providers.base import ClusterHandle


class _Core:
    def __init__(self, cluster) -> None:
        self.cluster = cluster

    def list_namespace(self, label_selector: str):
        if self.cluster["down"]:
            raise ConnectionRefusedError("[Errno 111] Connection refused")
        return SimpleNamespace(items=[])


def test_xdist_controller_does_not_sweep_a_cluster_it_took_down(tmp_path, monkeypatch, capsys):
    cluster = {"down": False}
    state = plugin.SuiteState(SuiteOptions.from_values({"gpushare_cluster": "local"}), None)
    monkeypatch.setattr(plugin.SuiteState, "run_dir", property(lambda self: tmp_path / "run"))
    handle = ClusterHandle(provider="local", kubeconfig=tmp_path / "kubeconfig", kubectl="kubectl")
    monkeypatch.setattr(handles, "read_handle", lambda run_dir: handle)
    monkeypatch.setattr(
        "gpushare_conformance.fixtures.framework.kube.Kube", lambda h: SimpleNamespace(core=_Core(cluster))
    )
    provider = SimpleNamespace(down=lambda progress: cluster.update(down=True))
    monkeypatch.setattr("gpushare_conformance.fixtures.providers.get_provider", lambda name, options: provider)
    config = SimpleNamespace(stash={plugin.PLUGIN_KEY: state}, pluginmanager=SimpleNamespace(getplugin=lambda n: None))
    plugin.pytest_sessionfinish(SimpleNamespace(config=config, exitstatus=0), 0)
    out = capsys.readouterr().out
    assert cluster["down"] and "clean-up failed" not in out and "Connection refused" not in out
