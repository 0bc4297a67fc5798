"""Stack profiles: the seed's request in each stack's terms, and clear errors."""

import json

import pytest

from gpushare_conformance.dra_request import DraRequestError
from gpushare_conformance.profiles import PROFILES, ProfileError, dra_profile, get_profile


def test_reference_profile_writes_the_seed_request():
    req = get_profile("reference").pod_request(8, 2)
    assert req.labels == {"aliyun.com/gpu-count": "2"}
    assert req.limits == {"aliyun.com/gpu-mem": "8"}


def test_single_gpu_sharing_has_no_count_label():
    req = get_profile("reference").pod_request(3, None)
    assert req.labels == {}
    assert req.limits == {"aliyun.com/gpu-mem": "3"}


def test_hami_asks_cards_and_mib_per_card():
    req = get_profile("hami").pod_request(8, 2)
    assert req.labels == {}
    assert req.limits == {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "4096"}


def test_open_gpushare_gets_the_seed_request_as_its_users_write_it():
    # gpushare documents one card per pod; the seed's pod is submitted as written (the
    # label it ignores included), and the evidence shows what it made of it.
    req = get_profile("gpushare").pod_request(8, 2)
    assert req.labels == {"aliyun.com/gpu-count": "2"} and req.limits == {"aliyun.com/gpu-mem": "8"}
    assert get_profile("gpushare").pod_request(4, None).limits == {"aliyun.com/gpu-mem": "4"}


def test_known_gaps_name_rules_of_the_registry():
    from gpushare_conformance.rules import RULES

    for profile in PROFILES.values():
        assert profile.known_gaps <= set(RULES), (profile.name, profile.known_gaps - set(RULES))
    assert {"multi_gpu_share", "alloc_past_share_refused"} <= get_profile("gpushare").known_gaps
    assert not get_profile("reference").known_gaps and not get_profile("hami").known_gaps


def test_no_profile_field_can_turn_a_check_into_a_skip():
    # Verdicts come from evidence: the fields that used to let a profile skip the
    # isolation checks ("does not claim memory isolation", "mounts no probe") are gone.
    for profile in PROFILES.values():
        assert not hasattr(profile, "isolates_memory") and not hasattr(profile, "probe_path")


def test_rule_breaking_requests_are_rendered_as_asked():
    # The restriction checks submit 3 GiB over 2 cards on purpose.
    assert get_profile("ack").pod_request(3, 2).limits == {"aliyun.com/gpu-mem": "3"}


@pytest.mark.parametrize("total, cards", [(0, 1), (-1, 1), (2.5, 1), (True, 1), (4, 0), (4, "2")])
def test_invalid_request_values_are_errors(total, cards):
    with pytest.raises(ProfileError, match="total_gib|cards"):
        get_profile("reference").pod_request(total, cards)


def test_unknown_profile_lists_known_ones():
    with pytest.raises(ProfileError, match=r"unknown stack profile 'volcano'; known: reference, ack, gpushare, hami"):
        get_profile("volcano")


def _node(allocatable, name="gpu-1"):
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def test_profile_cluster_mismatch_names_missing_resource_and_node():
    node = _node({"cpu": "2", "aliyun.com/gpu-mem": "60", "aliyun.com/gpu-count": "4"})
    get_profile("reference").check_node(node)
    with pytest.raises(ProfileError, match=r"'hami' does not match node 'gpu-1'.*nvidia.com/gpu"):
        get_profile("hami").check_node(node)


def test_allocated_cards_from_each_annotation_form():
    pod = {"metadata": {"name": "p", "annotations": {"ALIYUN_COM_GPU_MEM_IDX": "1,2"}}}
    assert get_profile("reference").allocated_cards(pod) == ["1", "2"]
    ack = {
        "metadata": {
            "name": "p",
            "annotations": {"scheduler.framework.gpushare.allocation": json.dumps({"0": {"3": 4, "1": 4}})},
        }
    }
    assert get_profile("ack").allocated_cards(ack) == ["1", "3"]
    hami = {
        "metadata": {
            "name": "p",
            "annotations": {"hami.io/vgpu-devices-allocated": "GPU-aaa,NVIDIA,4096,0:GPU-bbb,NVIDIA,4096,0:;"},
        }
    }
    assert get_profile("hami").allocated_cards(hami) == ["GPU-aaa", "GPU-bbb"]


def test_duplicate_cards_are_kept_so_a_check_can_see_them():
    pod = {"metadata": {"name": "p", "annotations": {"ALIYUN_COM_GPU_MEM_IDX": "1,1"}}}
    assert get_profile("reference").allocated_cards(pod) == ["1", "1"]


@pytest.mark.parametrize("value", ["", "a,b", "1;2"])
def test_malformed_allocation_annotation_is_an_error(value):
    pod = {"metadata": {"name": "p", "annotations": {"ALIYUN_COM_GPU_MEM_IDX": value}}}
    with pytest.raises(ProfileError, match="ALIYUN_COM_GPU_MEM_IDX"):
        get_profile("reference").allocated_cards(pod)


def test_missing_allocation_annotation_is_an_error_not_zero_cards():
    with pytest.raises(ProfileError, match="none of the allocation annotations"):
        get_profile("reference").allocated_cards({"metadata": {"name": "p", "annotations": {}}})


def test_every_profile_names_its_node_resources_or_its_dra_claim():
    for profile in PROFILES.values():
        if profile.dra is not None:
            # A DRA stack advertises nothing on the node: its slices and claims speak.
            assert not profile.node_resources and profile.dra.device_class and profile.dra.capacity
        else:
            assert profile.node_resources and profile.memory_resource


def test_the_dra_profile_asks_the_seed_request_as_a_claim_template():
    request = get_profile("dra").pod_request(8, 2)
    assert request.labels == {} and request.limits == {}
    devices = request.claim_template["spec"]["spec"]["devices"]
    assert [r["exactly"]["capacity"]["requests"]["memory"] for r in devices["requests"]] == ["4Gi", "4Gi"]
    assert devices["constraints"] == [
        {"requests": ["gpu-0", "gpu-1"], "distinctAttribute": "gpu.gpushare.conformance.io/uuid"}
    ]


def test_a_dra_profile_for_another_driver_names_its_class_capacity_and_attribute():
    profile = dra_profile("gpu.nvidia.com", "memory", "gpu.nvidia.com/uuid", "gpu.nvidia.com")
    assert profile.dra.attribute_name == "uuid"
    exactly = profile.pod_request(4, None).claim_template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["deviceClassName"] == "gpu.nvidia.com" and exactly["capacity"]["requests"] == {"memory": "4Gi"}
    with pytest.raises(DraRequestError, match="distinct attribute must be <domain>/<name>.*'uuid'"):
        dra_profile("gpu.nvidia.com", "memory", "uuid", "gpu.nvidia.com")
    with pytest.raises(DraRequestError, match="capacity must be a non-empty name, got ''"):
        dra_profile("gpu.nvidia.com", "", "gpu.nvidia.com/uuid", "gpu.nvidia.com")


class _Nodes:
    """Just enough of the framework's Kube for the GPU-node discovery."""

    def __init__(self, *nodes):
        self._nodes = list(nodes)

    def nodes(self):
        return self._nodes


def _gpu_node(name, allocatable, annotations=None):
    return {"metadata": {"name": name, "annotations": annotations or {}}, "status": {"allocatable": allocatable}}


@pytest.mark.parametrize(
    "allocatable, named",
    [
        ({"aliyun.com/gpu-mem": "0", "aliyun.com/gpu-count": "0"}, "aliyun.com/gpu-mem: 0"),
        ({"aliyun.com/gpu-mem": "60", "aliyun.com/gpu-count": "0"}, "aliyun.com/gpu-count: 0"),
    ],
)
def test_a_node_advertising_zero_is_an_infrastructure_error_not_a_gpu_node(allocatable, named):
    from gpushare_conformance.fixtures.framework.discovery import gpu_nodes_of
    from gpushare_conformance.fixtures.providers.base import InfrastructureError

    kube = _Nodes(_gpu_node("gpu-1", {"cpu": "2", **allocatable}))
    with pytest.raises(InfrastructureError, match=rf"node gpu-1 advertises .*{named}.*not registered"):
        gpu_nodes_of(kube, get_profile("reference"), None, print)


def test_card_sizes_come_from_the_stacks_card_list_in_mib():
    from gpushare_conformance.fixtures.framework.discovery import gpu_nodes_of

    cards = json.dumps([{"index": i, "memory_mib": 16160} for i in range(4)])
    node = _gpu_node(
        "gpu-1",
        {"aliyun.com/gpu-mem": "60", "aliyun.com/gpu-count": "4"},
        {"gpushare.conformance.io/cards": cards},
    )
    (gpus,) = gpu_nodes_of(_Nodes(node), get_profile("reference"), None, print)
    assert [c.memory_mib for c in gpus.cards] == [16160] * 4, "NVML's size, not capacity / count (15360)"
