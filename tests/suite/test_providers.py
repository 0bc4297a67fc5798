"""Provider selection and the parts of the kind/existing providers that need no cluster."""

import pytest
import yaml

from gpushare_conformance.fixtures.providers import ProviderError, get_provider
from gpushare_conformance.fixtures.providers.base import InfrastructureError
from gpushare_conformance.fixtures.providers.existing import ExistingClusterError, ExistingProvider
from gpushare_conformance.fixtures.providers.extender_tls import ensure_extender_pki
from gpushare_conformance.fixtures.providers.kind import (
    SCHEDULER_CONFIG_PATH,
    KindProvider,
    KindProviderError,
    kind_config,
    scheduler_config,
)


def test_unknown_provider_is_a_clear_error():
    with pytest.raises(
        ProviderError, match="unknown cluster provider 'minikube'; choose one of local, kind, existing, in-cluster"
    ):
        get_provider("minikube")


def test_provider_rejects_options_it_does_not_take():
    with pytest.raises(ProviderError, match="'existing' rejected options"):
        get_provider("existing", {"inventory": "x"})


def test_existing_provider_missing_kubeconfig(tmp_path):
    provider = ExistingProvider(kubeconfig=tmp_path / "nope", kubectl_binary="kubectl")
    with pytest.raises(
        ExistingClusterError, match=r"--gpushare-cluster-kubeconfig \(run: --kubeconfig\): file not found"
    ):
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
    with pytest.raises(
        InfrastructureError, match=f"cannot reach the API server https://127.0.0.1:1 .kubeconfig {kubeconfig}"
    ):
        provider.up(lambda _: None)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "is empty: no cluster to reach"),
        ("apiVersion: v1\nkind: Config\n", "is empty|names no current-context"),
        ("- a list\n", "is not a kubeconfig"),
        ("current-context: gone\ncontexts: []\n", "has no context 'gone'"),
        ("current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters: []\n", "with no server"),
    ],
)
def test_an_unusable_kubeconfig_is_an_infrastructure_error_before_kubectl_runs(tmp_path, text, says):
    """kubectl reads an empty kubeconfig as http://localhost:8080; the provider stops first."""
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(text)
    provider = ExistingProvider(kubeconfig=kubeconfig, kubectl_binary="/bin/false")
    with pytest.raises(InfrastructureError, match=f"kubeconfig {kubeconfig}.*({says})"):
        provider.up(lambda _: None)


def test_kind_scheduler_config_names_the_extender(tmp_path):
    config = scheduler_config(ensure_extender_pki(tmp_path / "pki"))
    extender = config["extenders"][0]
    assert extender["urlPrefix"].startswith("https://127.0.0.1:") and extender["enableHTTPS"] is True
    assert set(extender["tlsConfig"]) == {"caData", "certData", "keyData"}
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
    # the default release (1.37) takes kubeadm's v1beta4 list form
    assert patch["scheduler"]["extraArgs"] == [{"name": "config", "value": SCHEDULER_CONFIG_PATH}]


def test_kind_without_a_kind_binary_says_how_to_point_at_one(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    provider = KindProvider(inventory=__file__)
    with pytest.raises(KindProviderError, match="kind not found on PATH; pass --gpushare-kind-binary"):
        provider.up(lambda _: None)
