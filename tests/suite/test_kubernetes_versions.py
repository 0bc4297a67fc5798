"""The served Kubernetes releases: how a version is named, what each cluster needs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gpushare_conformance.fixtures.options import OptionError, SuiteOptions
from gpushare_conformance.fixtures.providers import versions
from gpushare_conformance.fixtures.providers.base import feature_gates_flag
from gpushare_conformance.fixtures.providers.kind import kind_config

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("given", "version"),
    [("1.35", "v1.35.4"), ("v1.36", "v1.36.3"), ("1.37.2", "v1.37.2"), ("v1.37.2", "v1.37.2"), (None, "v1.37.2")],
)
def test_a_minor_or_its_served_patch_names_a_release(given: str | None, version: str) -> None:
    assert versions.resolve(given).version == version


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("1.33", "Kubernetes 1.33 is not one the providers build"),
        ("1.37.1", "the patch release served for 1.37 is v1.37.2"),
        ("latest", "is not a Kubernetes version like 1.37 or v1.37.2"),
        ("2.0", "is not a Kubernetes version"),
    ],
)
def test_a_version_not_served_is_refused_naming_the_field_and_value(given: str, says: str) -> None:
    with pytest.raises(versions.VersionError) as caught:
        versions.resolve(given, "--kubernetes-version")
    message = str(caught.value)
    assert message.startswith(f"--kubernetes-version: {given!r}"), message
    assert says in message and "1.37 (v1.37.2)" in message, message


def test_the_default_is_the_newest_supported_release_and_the_build_scripts_agree() -> None:
    assert versions.DEFAULT is versions.SUPPORTED[-1]
    assert [r.minor for r in versions.SUPPORTED] == ["1.35", "1.36", "1.37"]
    script = (REPO / "ci" / "build-kubernetes.sh").read_text()
    assert f'K8S_VERSION="${{K8S_VERSION:-{versions.DEFAULT.version}}}"' in script


def test_consumable_capacity_is_switched_on_only_where_it_is_alpha() -> None:
    gates = {r.minor: r.feature_gates for r in versions.RELEASES}
    assert gates["1.34"] == gates["1.35"] == {"DRAConsumableCapacity": True}
    assert gates["1.36"] == gates["1.37"] == {}
    assert feature_gates_flag(gates["1.35"]) == ["--feature-gates=DRAConsumableCapacity=true"]
    assert feature_gates_flag(gates["1.37"]) == []


def test_kind_config_speaks_the_kubeadm_api_of_the_release(tmp_path: Path) -> None:
    def scheduler_args(minor: str):
        config = kind_config(tmp_path / "sched.yaml", [], versions.resolve(minor))
        patches = [yaml.safe_load(p) for p in config["nodes"][0]["kubeadmConfigPatches"]]
        cluster = next(p for p in patches if p["kind"] == "ClusterConfiguration")
        kubelet = yaml.safe_load(config["kubeadmConfigPatches"][0])
        assert kubelet["failCgroupV1"] is False  # 1.35+ refuse cgroup v1 hosts by default
        return config["featureGates"], cluster["scheduler"]["extraArgs"]

    gates, args = scheduler_args("1.35")
    assert gates == {"DRAConsumableCapacity": True}
    assert args == {"config": "/etc/kubernetes/gpushare-scheduler-config.yaml"}
    gates, args = scheduler_args("1.37")
    assert gates == {}
    assert isinstance(args, list) and args[0]["name"] == "config", args


def test_the_suite_option_is_checked_and_reaches_the_local_and_kind_providers() -> None:
    options = SuiteOptions.from_values({"gpushare_cluster": "kind", "gpushare_kubernetes_version": "1.36"})
    assert options.provider_options()["kubernetes_version"] == "1.36"
    with pytest.raises(OptionError, match=re.escape("--gpushare-kubernetes-version: '1.30'")):
        SuiteOptions.from_values({"gpushare_kubernetes_version": "1.30"})
    with pytest.raises(OptionError, match="only applies to --gpushare-cluster local or kind"):
        SuiteOptions.from_values(
            {"gpushare_cluster": "existing", "gpushare_kubernetes_version": "1.37", "gpushare_kubeconfig": None}
        )


def test_the_controller_manager_is_given_only_controllers_its_release_knows() -> None:
    # 1.37 dropped the cloud node lifecycle controller; naming it stops the controller manager
    assert versions.resolve("1.36").controllers == "*,-nodeipam,-cloud-node-lifecycle"
    assert versions.resolve("1.37").controllers == "*,-nodeipam"


def test_preloaded_images_are_not_pulled_again_where_the_kubelet_would_verify_them() -> None:
    # 1.34 refuses the field (its gate is off); from 1.35 the kubelet would re-pull an image
    # it once pulled from a registry under another name
    assert versions.resolve("1.34").kubelet_settings == {}
    assert versions.resolve("1.35").kubelet_settings == {"imagePullCredentialsVerificationPolicy": "NeverVerify"}
