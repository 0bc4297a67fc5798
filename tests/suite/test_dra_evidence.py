"""What the suite reads of a DRA stack: its nodes from the slices, a pod's cards from its claims."""

from __future__ import annotations

import pytest

from gpushare_conformance.dra_request import DraSpelling
from gpushare_conformance.fixtures.framework import dra

DRIVER = "gpu.example.com"
SPELLING = DraSpelling(device_class=DRIVER, distinct_attribute=f"{DRIVER}/uuid")


def slice_(node: str, generation: int, *devices: tuple[str, str, str], driver: str = DRIVER) -> dict:
    return {
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": len(devices)},
            "devices": [
                {"name": name, "attributes": {"uuid": {"string": uuid}}, "capacity": {"memory": {"value": memory}}}
                for name, uuid, memory in devices
            ],
        }
    }


SLICES = [
    slice_("a", 2, ("gpu-0", "GPU-a0", "15Gi")),
    slice_("a", 2, ("gpu-1", "GPU-a1", "15Gi")),
    slice_("a", 1, ("gpu-9", "GPU-stale", "15Gi")),  # an older generation: stale
    slice_("b", 1, ("gpu-0", "GPU-b0", "40Gi")),
    slice_("a", 5, ("gpu-0", "GPU-x", "1Gi"), driver="other.example.com"),
]


def test_a_drivers_nodes_are_its_newest_slices_devices():
    found = dra.node_devices(SLICES, SPELLING)
    assert {node: [d["name"] for d in devices] for node, devices in found.items()} == {
        "a": ["gpu-0", "gpu-1"],
        "b": ["gpu-0"],
    }
    assert [dra.device_capacity_mib(d, SPELLING) for d in found["a"]] == [15 * 1024, 15 * 1024]
    assert dra.device_capacity_mib(found["b"][0], DraSpelling(DRIVER, f"{DRIVER}/uuid", capacity="cores")) is None


class Cluster:
    def __init__(self, claims: dict[str, dict]) -> None:
        self.claims = claims

    def resource_slices(self) -> list[dict]:
        return SLICES

    def resource_claim(self, namespace: str, name: str) -> dict:
        return self.claims[name]


POD = {
    "metadata": {"namespace": "ns", "name": "p"},
    "status": {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "p-gpus-x"}]},
}


def result(request: str, device: str, consumed: str | None, driver: str = DRIVER) -> dict:
    out = {"request": request, "driver": driver, "pool": "a", "device": device, "shareID": f"s-{request}"}
    if consumed:
        out["consumedCapacity"] = {"memory": consumed}
    return out


def test_a_pods_cards_are_its_claims_devices_in_request_order_with_what_they_consumed():
    allocated = {
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        result("gpu-1", "gpu-0", "2Gi"),
                        result("gpu-0", "gpu-1", "2Gi"),
                        result("nic", "eth0", None, driver="net.example.com"),
                    ]
                }
            }
        }
    }
    shares = dra.pod_shares(Cluster({"p-gpus-x": allocated}), POD, SPELLING)
    assert [(s.request, s.card, s.consumed_mib, s.share_id) for s in shares] == [
        ("gpu-0", "GPU-a1", 2048, "s-gpu-0"),
        ("gpu-1", "GPU-a0", 2048, "s-gpu-1"),
    ]


def test_a_pod_without_an_allocated_claim_is_an_error_not_zero_cards():
    with pytest.raises(dra.DraEvidenceError, match="has no generated claim"):
        dra.pod_shares(Cluster({}), {"metadata": {"namespace": "ns", "name": "p"}}, SPELLING)
    with pytest.raises(dra.DraEvidenceError, match="claim ns/p-gpus-x of pod p is not allocated"):
        dra.pod_shares(Cluster({"p-gpus-x": {"status": {}}}), POD, SPELLING)
    other = {
        "status": {"allocation": {"devices": {"results": [result("nic", "eth0", None, driver="net.example.com")]}}}
    }
    with pytest.raises(dra.DraEvidenceError, match=f"hold no {DRIVER} device"):
        dra.pod_shares(Cluster({"p-gpus-x": other}), POD, SPELLING)


def test_requests_keep_their_written_order_past_nine_cards():
    results = [result(f"gpu-{i}", "gpu-0", "1Gi") for i in (10, 2, 0)]
    allocated = {"status": {"allocation": {"devices": {"results": results}}}}
    shares = dra.pod_shares(Cluster({"p-gpus-x": allocated}), POD, SPELLING)
    assert [s.request for s in shares] == ["gpu-0", "gpu-2", "gpu-10"]
