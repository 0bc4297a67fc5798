"""GPU-node discovery without pytest or a cluster: a small fake of the ``Kube`` wrapper
(``nodes()``, ``resource_slices()``), a cluster handle, and the options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpushare_conformance.fixtures.framework import discovery
from gpushare_conformance.fixtures.options import OptionError, SuiteOptions
from gpushare_conformance.fixtures.providers.base import ClusterHandle, InfrastructureError
from gpushare_conformance.profiles import get_profile


class _Kube:
    def __init__(self, nodes=(), slices=()) -> None:
        self._nodes, self._slices = list(nodes), list(slices)

    def nodes(self) -> list[dict]:
        return self._nodes

    def resource_slices(self) -> list[dict]:
        return self._slices


def _node(name: str, cards: int = 2) -> dict:
    listed = json.dumps([{"index": i, "memory_mib": 16160} for i in range(cards)])
    return {
        "metadata": {"name": name, "annotations": {"gpushare.conformance.io/cards": listed}},
        "status": {"allocatable": {"aliyun.com/gpu-mem": str(15 * cards), "aliyun.com/gpu-count": str(cards)}},
    }


def _existing(**values) -> SuiteOptions:
    return SuiteOptions.from_values({"gpushare_cluster": "existing", "gpushare_mocked_nvml": True, **values})


HANDLE = ClusterHandle(provider="existing", kubeconfig=Path("/k"), kubectl="kubectl", details={"kubernetes": "v1.34"})


def test_a_deployed_clusters_gpu_nodes_come_with_their_listed_cards(tmp_path):
    kube = _Kube([_node("gpu-1"), {"metadata": {"name": "cpu-1"}, "status": {"allocatable": {"cpu": "4"}}}])
    profile = get_profile("reference")
    (gpus,) = discovery.discover_gpu_nodes(kube, HANDLE, _existing(), profile, tmp_path, print)
    assert gpus.node == "gpu-1" and [c.memory_mib for c in gpus.cards] == [16160, 16160]


def test_a_cluster_without_the_profiles_resources_names_its_nodes():
    with pytest.raises(InfrastructureError, match=r"no node \(of: cpu-1\) advertises aliyun.com/gpu-mem"):
        discovery.gpu_nodes_of(
            _Kube([{"metadata": {"name": "cpu-1"}, "status": {}}]), get_profile("reference"), None, print
        )


def test_deploying_the_reference_stack_for_another_profile_is_an_option_error(tmp_path):
    options = _existing(gpushare_deploy_stack=True, gpushare_stack="hami")
    with pytest.raises(
        OptionError, match="--gpushare-deploy-stack deploys the reference stack, but --gpushare-stack is hami"
    ):
        discovery.discover_gpu_nodes(_Kube(), HANDLE, options, get_profile("hami"), Path("."), print)


def test_a_dra_stack_without_slices_is_an_infrastructure_error():
    with pytest.raises(InfrastructureError, match="no ResourceSlice of driver"):
        discovery.gpu_nodes_of(_Kube(), get_profile("dra"), None, print)


def test_a_dra_node_whose_devices_publish_no_memory_capacity_is_named():
    spelling = get_profile("dra").dra
    slice_ = {
        "metadata": {"name": "s1"},
        "spec": {
            "driver": spelling.driver,
            "nodeName": "gpu-1",
            "pool": {"name": "gpu-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {}, "capacity": {}}],
        },
    }
    with pytest.raises(InfrastructureError, match=r"node gpu-1: the 1 device\(s\) driver .* have no 'memory' capacity"):
        discovery.gpu_nodes_of(_Kube(slices=[slice_]), get_profile("dra"), None, print)


def test_a_stack_that_never_becomes_ready_is_an_infrastructure_error():
    from gpushare_conformance.fixtures.framework.wait import WaitError

    def never(**kwargs):
        raise WaitError("timed out after 1s waiting for the stack")

    with pytest.raises(InfrastructureError, match="the stack is not ready: timed out"):
        discovery.stack_ready(never, timeout=1)


def test_the_runs_facts_name_the_cluster_the_stack_and_each_nodes_cards(tmp_path):
    profile = get_profile("reference")
    gpus = discovery.gpu_nodes_of(_Kube([_node("gpu-1", cards=1)]), profile, None, print)
    facts = discovery.run_facts(_existing(), profile, HANDLE, gpus)
    assert facts["cluster"] == "existing" and facts["stack"] == "reference" and facts["nodes"] == "gpu-1"
    assert facts["node.gpu-1.cards"] == "0:16160MiB" and facts["kubernetes"] == "v1.34"
    assert facts["mocked_nvml"] == "true" and "driver" not in facts
