"""DRA's consumable capacity keeps its promises (KEP-5075): a card's device allows
multiple allocations and states a request policy; a share that is not a multiple of
the policy's step consumes what the policy makes of it; the container gets exactly
what its share consumed, card by card; each share of a card has its own share id;
the shares of a card never consume more than the card; the claims of deleted pods
give their capacity back.

Each figure is read from the cluster (the ResourceSlices, the claims' allocation) and
set beside what the pod sees (nvidia-smi in it). N/A on a stack that does not allocate
through DRA.
"""

from __future__ import annotations

import json
from collections import defaultdict

import allure
import pytest
from kubernetes.client.exceptions import ApiException

from gpushare_conformance.allocation import DEFAULT_TOLERANCE, card_totals_mib
from gpushare_conformance.dra_request import per_card_quantity
from gpushare_conformance.fixtures.framework import dra
from gpushare_conformance.fixtures.framework import verdicts as v
from gpushare_conformance.fixtures.framework.wait import WaitError
from gpushare_conformance.fixtures.inventory import quantity

pytestmark = [pytest.mark.e2e, pytest.mark.isolation]

MIB = 1 << 20
SHAREABLE = "allowMultipleAllocations and a requestPolicy"


def _odd_total(cards: int) -> int:
    """A total whose share per card is not a whole GiB (1.5 GiB per card where it can)."""
    return cards + cards // 2 if cards % 2 == 0 else cards + 1


def _shareable(device: dict, spelling) -> str:
    """What the device states of sharing, in the words of the verdict."""
    policy = dra.request_policy(device, spelling)
    if device.get("allowMultipleAllocations") is True and policy is not None:
        return SHAREABLE
    return (
        f"allowMultipleAllocations={device.get('allowMultipleAllocations')!r}, "
        f"capacity.{spelling.capacity}.requestPolicy={json.dumps(policy)}"
    )


def _node_results(suite, node_devices: set[tuple[str, str]], driver: str) -> dict[tuple[str, str], list[dict]]:
    """Every allocated share of the node's devices, cluster-wide: (pool, device) -> results."""
    claims = suite.kube.raw(suite.kube.resource.list_resource_claim_for_all_namespaces)
    found: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for claim in claims.get("items") or []:
        meta = claim.get("metadata") or {}
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            key = (str(result.get("pool")), str(result.get("device")))
            if result.get("driver") == driver and key in node_devices:
                found[key].append({"claim": f"{meta.get('namespace')}/{meta.get('name')}", **result})
    return found


@pytest.mark.capacity(cards="all")
def test_consumable_capacity_keeps_its_promises(suite):
    spelling = suite.profile.dra
    if spelling is None:
        suite.not_applicable(
            "dra_device_shareable", f"stack {suite.profile.name} does not allocate through DRA (no ResourceSlices)"
        )
        return
    node = suite.node
    slices = dra.current_slices(suite.kube.resource_slices(), spelling.driver)
    devices: dict[str, dict] = {}
    node_devices: set[tuple[str, str]] = set()
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("nodeName") == node.node:
            for device in spec.get("devices") or []:
                devices[str(device.get("name"))] = device
                node_devices.add((str((spec.get("pool") or {}).get("name")), str(device.get("name"))))
    with allure.step(f"Each device of {node.node} allows multiple allocations and states a request policy"):
        for name, device in sorted(devices.items()):
            suite.expect(
                v.equal(f"dra_device_shareable[{name}]", SHAREABLE, _shareable(device, spelling), f"device {name}")
            )
    cards = len(node.cards)
    total = _odd_total(cards)
    asked = per_card_quantity(total, cards)
    asked_bytes = quantity(asked) or 0
    pods = ["share-a", "share-b"]
    with allure.step(f"Two pods, each asking {asked} of every one of the {cards} cards of {node.node}"):
        for pod in pods:
            suite.submit_share_pod_on(node.node, pod, total, cards)
        running = {pod: suite.wait_running(pod) for pod in pods}
    with allure.step("Each share consumed what its device's policy makes of the request; the container sees that"):
        claims: list[str] = []
        for pod, obj in running.items():
            shares = suite.claim_shares(obj)
            claims += sorted({s.claim for s in shares})
            seen = card_totals_mib(suite.nvidia_smi_exec(pod))
            for visible, share in enumerate(shares):
                policy = dra.request_policy(devices.get(share.device) or {}, spelling)
                want = dra.policy_consumes(policy, asked_bytes) if policy is not None else asked_bytes
                want_mib = None if want is None else want // MIB
                suite.expect(
                    v.equal(
                        f"consumed_as_policy[{pod}, {share.request}]",
                        want_mib,
                        share.consumed_mib,
                        f"{share.request} asked {asked} of {share.device}, whose request policy "
                        f"{json.dumps(policy)} makes it {want_mib} MiB; MiB the claim consumed",
                    )
                )
                took = share.consumed_mib or 0
                suite.expect(
                    v.within(
                        f"container_gets_consumed[{pod}, card {visible}]",
                        seen.get(visible),
                        int(took * (1 - DEFAULT_TOLERANCE)),
                        took,
                        "MiB",
                        f"{pod}'s claim consumed {took} MiB of {share.device} (asked {asked}); "
                        f"nvidia-smi in it shows card {visible} with",
                    )
                )
    with allure.step(f"Per device of {node.node}: each share has its own share id, and together they fit the card"):
        results = _node_results(suite, node_devices, spelling.driver)
        for pool, name in sorted(node_devices):
            held = results.get((pool, name), [])
            ids = [r.get("shareID") for r in held]
            clashes = [f"{r['claim']} {r.get('request')}: shareID {r.get('shareID')!r}" for r in held]
            clashes = [c for c, i in zip(clashes, ids, strict=True) if not i or ids.count(i) > 1]
            suite.expect(
                v.none_of(f"share_ids_distinct[{name}]", clashes, f"shares of {name} without a share id of their own")
            )
            used = sum(quantity((r.get("consumedCapacity") or {}).get(spelling.capacity)) or 0 for r in held) // MIB
            capacity = dra.device_capacity_mib(devices.get(name) or {}, spelling) or 0
            suite.expect(
                v.at_most(
                    f"consumed_within_card[{name}]",
                    used,
                    capacity,
                    "MiB",
                    f"{len(held)} share(s) of {name} ({capacity} MiB published) consume",
                )
            )
    with allure.step("Deleting the pods gives their claims' capacity back"):
        try:
            suite.delete_pods(pods)
            still: list[str] = []
        except WaitError as exc:
            still = [str(exc).splitlines()[0][:400]]
        for claim in claims:
            try:
                obj = suite.kube.resource_claim(suite.namespace, claim)
            except ApiException as exc:
                if exc.status == 404:  # gone: released with its pod
                    continue
                raise
            if (obj.get("status") or {}).get("allocation"):
                still.append(f"{claim} still allocated")
        suite.expect(v.none_of("claims_released", still, "claims of the deleted pods still holding capacity"))
