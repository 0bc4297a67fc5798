"""Memory isolation: a pod can allocate its share on each card and nothing past it;
pods sharing cards each see only their own share and together never exceed a card;
the node advertises what NVML reports.
"""

from __future__ import annotations

from pathlib import Path

import allure
import pytest

from fixtures.inventory import cards_from_inventory, load_inventory
from gpushare_conformance.allocation import card_totals_mib, check_card_count, check_card_total
from gpushare_conformance.evidence import parse_nvidia_smi

pytestmark = [pytest.mark.e2e, pytest.mark.isolation]

OOM = "CUDA_ERROR_OUT_OF_MEMORY"
# Allocation headroom below the share for context/driver overhead on real cards.
HEADROOM_MIB = 64


def _require_isolation(suite) -> None:
    if not suite.profile.isolates_memory:
        pytest.skip(f"stack profile {suite.profile.name!r} does not claim memory isolation")
    if not suite.profile.probe_path:
        pytest.skip(f"stack profile {suite.profile.name!r} mounts no allocation probe into pods")


def _alloc_within_and_past(suite, pod: str, visible: int, total_mib: int, physical_mib: int | None) -> None:
    within = total_mib - HEADROOM_MIB
    with allure.step(f"Card {visible}: allocating {within} MiB (within the {total_mib} MiB shown) succeeds"):
        ok = suite.probe_alloc(pod, visible, within)
        suite.verdict(f"alloc_within_share[card {visible}]", "exit 0", f"exit {ok.exit_status}", ok.exit_status == 0,
                      ok.output.strip()[-300:])
    past = total_mib + 1
    with allure.step(f"Card {visible}: allocating {past} MiB (past the share) fails with {OOM}"):
        if physical_mib is not None:
            suite.verdict(f"past_share_below_physical[card {visible}]", f"< {physical_mib} MiB", f"{past} MiB",
                          past < physical_mib, "the over-share allocation must fit the physical card, so only isolation can refuse it")
        bad = suite.probe_alloc(pod, visible, past)
        suite.verdict(f"alloc_past_share_oom[card {visible}]", f"non-zero exit and {OOM}",
                      f"exit {bad.exit_status}, {'OOM' if OOM in bad.output else 'no OOM'} in output",
                      bad.exit_status != 0 and OOM in bad.output, bad.output.strip()[-300:])


def test_allocation_up_to_share_succeeds_and_past_share_fails_out_of_memory(suite):
    _require_isolation(suite)
    cards = 2 if suite.max_cards >= 2 and suite.profile.max_cards != 1 else 1
    per_card = 2
    with allure.step(f"Run a pod with {per_card} GiB on each of {cards} card(s)"):
        pod = suite.submit_share_pod("alloc", per_card * cards, cards if cards > 1 else None)
        obj = suite.wait_running(pod)
    report = suite.nvidia_smi_exec(pod)
    suite.expect(check_card_count(len(report.gpus), cards))
    for visible, total in sorted(card_totals_mib(report).items()):
        physical = suite.physical_mib(obj, visible)
        suite.expect(check_card_total(total, per_card, physical))
        _alloc_within_and_past(suite, pod, visible, total, physical)


def test_two_pods_on_the_same_cards_each_see_their_share_and_never_exceed_a_card(suite):
    _require_isolation(suite)
    cards = suite.max_cards if suite.profile.max_cards is None else 1
    card_gib = suite.node.card_gib
    first, second = 2, 3
    if first + second > card_gib:
        pytest.skip(f"needs cards of at least {first + second} GiB; the node's hold {card_gib} GiB")
    with allure.step(f"Two pods over all {cards} card(s): {first} GiB and {second} GiB per card"):
        a = suite.submit_share_pod("share-a", first * cards, cards)
        b = suite.submit_share_pod("share-b", second * cards, cards)
        pod_a, pod_b = suite.wait_running(a), suite.wait_running(b)
    with allure.step("Both pods got the same cards"):
        cards_a, cards_b = suite.allocated_cards(pod_a), suite.allocated_cards(pod_b)
        suite.verdict("same_cards", sorted(cards_a), sorted(cards_b), sorted(cards_a) == sorted(cards_b),
                      "with one pod per card set, sharing must put both on every card")
    for name, obj, share in ((a, pod_a, first), (b, pod_b, second)):
        with allure.step(f"{name} sees {share} GiB on each card, and can allocate it, not more"):
            report = suite.nvidia_smi_exec(name)
            suite.expect(check_card_count(len(report.gpus), cards))
            for visible, total in sorted(card_totals_mib(report).items()):
                suite.expect(check_card_total(total, share, suite.physical_mib(obj, visible)))
            _alloc_within_and_past(suite, name, 0, card_totals_mib(report)[0], suite.physical_mib(obj, 0))
    with allure.step("Together they stay within each card: a pod asking the rest plus 1 GiB stays Pending"):
        rest = card_gib - first - second
        reason = suite.rejection_reason("overbook", (rest + 1) * cards, cards)
        suite.verdict("no_overbooking", "unschedulable", reason, bool(reason), f"reason: {reason}")
    if suite.profile.inspect_path:
        with allure.step("The extender's books: used never exceeds a card's total"):
            data = suite.inspect()
            over = [(n.get("name"), d.get("id"), d.get("usedGPU"), d.get("totalGPU"))
                    for n in data.get("nodes", []) for d in n.get("devs", []) if d.get("usedGPU", 0) > d.get("totalGPU", 0)]
            suite.verdict("inspect_used_within_total", "no card over-booked", over or "none", not over, str(over))


def test_node_advertising_matches_nvml_inventory(suite):
    if suite.profile.per_card_mib:
        pytest.skip(f"stack profile {suite.profile.name!r} advertises no GiB memory resource to compare")
    node = suite.node
    with allure.step("What NVML reports on the node"):
        if suite.options.mocked_nvml and suite.handle.details.get("inventory"):
            inventory = cards_from_inventory(load_inventory(Path(suite.handle.details["inventory"])))
            truth = {c.index: c.memory_mib for c in inventory}
            source = f"mock inventory {suite.handle.details['inventory']}"
        else:
            pods = suite.kube.pods_by_selector(suite.profile.stack_namespace, suite.profile.device_plugin_selector)
            pods = [p for p in pods if p["spec"].get("nodeName") == node.node]
            if not pods:
                pytest.fail(f"no device plugin pod on {node.node} to read NVML from")
            from fixtures.evidence import exec_in_pod

            out = exec_in_pod(suite.kube, suite.profile.stack_namespace, pods[0]["metadata"]["name"],
                              ["nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"])
            assert out.exit_status == 0, f"nvidia-smi in the device plugin pod exited {out.exit_status}: {out.output}"
            truth = {g.index: g.memory_total_mib for g in parse_nvidia_smi(out.stdout).gpus}
            source = "nvidia-smi in the device plugin pod"
        allure.attach(str(truth), f"NVML cards ({source})", allure.attachment_type.TEXT)
    expected_count = len(truth)
    expected_mem = sum(mib // 1024 for mib in truth.values())
    with allure.step(f"Node {node.node} advertises {expected_count} cards and {expected_mem} GiB"):
        suite.verdict("advertised_gpu_count", expected_count, node.advertised_count,
                      node.advertised_count == expected_count, f"allocatable {suite.profile.count_resource}")
        suite.verdict("advertised_gpu_mem", expected_mem, node.advertised_mem, node.advertised_mem == expected_mem,
                      f"allocatable {suite.profile.memory_resource} (whole GiB per card, summed)")
    if node.source.startswith("annotation"):
        with allure.step("The device plugin's card list matches NVML card by card"):
            seen = {c.index: c.memory_mib for c in node.cards}
            suite.verdict("node_cards_annotation", truth, seen, seen == truth, node.source)
