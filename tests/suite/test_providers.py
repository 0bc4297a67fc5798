"""Provider selection and the parts of the kind/existing providers that need no cluster."""

import pytest
import yaml

from gpushare_conformance.fixtures.providers import ProviderError, get_provider
from gpushare_conformance.fixtures.providers.existing import ExistingClusterError, ExistingProvider
from gpushare_conformance.fixtures.providers.kind import (
    SCHEDULER_CONFIG_PATH,
    KindProvider,
    KindProviderError,
    kind_config,
    scheduler_config,
)


def test_unknown_provider_is_a_clear_error():
    with pytest.raises(ProviderError, match="unknown cluster provider 'minikube'; choose one of local, kind, existing"):
        get_provider("minikube")


def test_provider_rejects_options_it_does_not_take():
    with pytest.raises(ProviderError, match="'existing' rejected options"):
        get_provider("existing", {"inventory": "x"})


def test_existing_provider_missing_kubeconfig(tmp_path):
    provider = ExistingProvider(kubeconfig=tmp_path / "nope", kubectl_binary="kubectl")
    with pytest.raises(ExistingClusterError, match="--cluster-kubeconfig: file not found"):
        provider.up(lambda _: None)


def test_existing_provider_unreachable_cluster_names_the_kubeconfig(tmp_path):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    provider = ExistingProvider(kubeconfig=kubeconfig, kubectl_binary="kubectl")
    with pytest.raises(ExistingClusterError, match=f"cannot list nodes with --kubeconfig {kubeconfig}"):
        provider.up(lambda _: None)


def test_kind_scheduler_config_names_the_extender():
    config = scheduler_config()
    extender = config["extenders"][0]
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert extender["urlPrefix"].endswith(":32766/gpushare-scheduler") and extender["bindVerb"] == "bind"
    assert [r["name"] for r in extender["managedResources"]] == ["aliyun.com/gpu-mem"]
    assert config["clientConnection"]["kubeconfig"] == "/etc/kubernetes/scheduler.conf"


def test_kind_config_mounts_the_scheduler_config(tmp_path):
    config = kind_config(tmp_path / "sched.yaml")
    node = config["nodes"][0]
    assert node["extraMounts"][0] == {
        "hostPath": str(tmp_path / "sched.yaml"),
        "containerPath": SCHEDULER_CONFIG_PATH,
        "readOnly": True,
    }
    patch = yaml.safe_load(node["kubeadmConfigPatches"][0])
    assert patch["scheduler"]["extraArgs"] == {"config": SCHEDULER_CONFIG_PATH}


def test_kind_without_a_kind_binary_says_how_to_point_at_one(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    provider = KindProvider(inventory=__file__)
    with pytest.raises(KindProviderError, match="kind not found on PATH; pass --kind-binary"):
        provider.up(lambda _: None)
