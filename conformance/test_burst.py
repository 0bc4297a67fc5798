"""Bursts: pods submitted at once that together fill a node's cards exactly all run
with their shares, each on exactly the cards the stack recorded for it (the device
plugin matched every Allocate to its own pod), and nothing is over-booked; one more
stays Pending with a reason. A burst that comes right after the scheduler extender
restarts, while pods placed before it still run, books no card twice: a restarted
extender places nothing until its view holds the running pods' cards.

Marked ``disruptive``: the burst fills every card of a node.
"""

from __future__ import annotations

from collections import defaultdict

import allure
import pytest

from gpushare_conformance.fixtures.framework import verdicts as v

pytestmark = [pytest.mark.e2e, pytest.mark.lifecycle, pytest.mark.disruptive]

# The cards a pod sees, by the identity NVML gives them.
CARD_QUERY = ("--query-gpu=index,uuid", "--format=csv,nounits")
# Rounds of whole-card twins: each round is a chance for a stack that confuses pods
# created together to show it (the confusion is a race).
TWIN_ROUNDS = 3


def _share_that_divides(card_gib: int) -> int:
    """The share of each burst pod: a card holds a whole number of them (several if it can)."""
    return next((card_gib // k for k in (3, 2) if card_gib % k == 0 and card_gib // k >= 1), card_gib)


def _expect_own_cards(suite, node: str, running: dict[str, dict]) -> None:
    """Per pod, the cards recorded for it (mapped to NVML UUIDs) are the cards nvidia-smi in it shows."""
    gpus, source = suite.nvml_gpus(node)
    uuid_of = {str(g.index): g.uuid for g in gpus} | {g.uuid: g.uuid for g in gpus if g.uuid}
    for name, obj in running.items():
        recorded = suite.allocated_cards(obj)
        want = sorted(uuid_of.get(str(card)) or f"card {card} (unknown to NVML: {source})" for card in recorded)
        seen = suite.nvidia_smi_exec(name, CARD_QUERY)
        got = sorted(g.uuid or f"card {g.index} without a UUID" for g in seen.gpus)
        suite.expect(
            v.equal(
                f"pod_sees_its_cards[{name}]",
                want,
                got,
                f"{name} was recorded on card(s) {', '.join(map(str, recorded))}; nvidia-smi in it shows",
            )
        )


def _twins_of_a_whole_card(suite, node, card_gib: int, round_: int) -> None:
    """One pod per card, all asking a whole card, created together: pods the device
    plugin cannot tell apart by their request, each on a card of its own, so a pod
    served another's Allocate sees the wrong card whichever two are confused."""
    names = [f"twin-{round_}-{i}" for i in range(len(node.cards))]
    suite.submit_share_pods_on_at_once(node.node, names, card_gib, None)
    running = {name: suite.wait_running(name) for name in names}
    _expect_own_cards(suite, node.node, running)
    suite.delete_pods(names)


def _card_size(node) -> int:
    """The one size of the node's cards (a burst fills them exactly)."""
    sizes = {c.memory_gib for c in node.cards}
    if len(sizes) != 1:
        pytest.skip(f"needs a node whose cards are one size to fill exactly; {node.node} has {sorted(sizes)} GiB")
    return sizes.pop()


def _card_order(card: str) -> tuple[bool, int, str]:
    return (not (card.isascii() and card.isdigit()), int(card) if card.isascii() and card.isdigit() else 0, card)


def _expect_cards_not_overbooked(suite, running: dict[str, dict], share: int, card_gib: int, verdict: str) -> dict:
    """Per card, the shares in the pods' allocations never exceed the card; returns GiB
    booked per card."""
    booked: dict[str, int] = defaultdict(int)
    holders: dict[str, list[str]] = defaultdict(list)
    for name, obj in running.items():
        for card, gib in suite.allocated_gib(obj, share).items():
            booked[card] += gib
            holders[card].append(f"{name}={gib}")
    for card in sorted(booked, key=_card_order):
        suite.expect(
            v.at_most(
                f"{verdict}[card {card}]",
                booked[card],
                card_gib,
                "GiB",
                f"card {card} of {card_gib} GiB booked by {', '.join(holders[card])}",
            )
        )
    return booked


def test_a_burst_that_fills_a_node_runs_and_overbooks_no_card(suite):
    node = suite.node
    card_gib = _card_size(node)
    share = _share_that_divides(card_gib)
    count = len(node.cards) * (card_gib // share)
    with allure.step(
        f"{TWIN_ROUNDS} x: {len(node.cards)} pods of a whole card ({card_gib} GiB) created together, "
        "each sees the card recorded for it"
    ):
        for round_ in range(TWIN_ROUNDS):
            _twins_of_a_whole_card(suite, node, card_gib, round_)
    burst = [f"burst-{i}" for i in range(count)]
    with allure.step(
        f"Submit {count} pods of {share} GiB at once: together they fill the {len(node.cards)} "
        f"cards of {card_gib} GiB of {node.node} exactly"
    ):
        for name in burst:
            suite.submit_share_pod_on(node.node, name, share, None)
    with allure.step("Every pod of the burst runs"):
        running = {name: suite.wait_running(name) for name in burst}
    with allure.step("Per card, the shares in the pods' allocation annotations never exceed the card"):
        for name, obj in running.items():
            suite.expect(v.equal(f"burst_pod_on_node[{name}]", node.node, obj["spec"].get("nodeName")))
        booked = _expect_cards_not_overbooked(suite, running, share, card_gib, "card_booked")
        suite.expect(
            v.equal(
                "node_filled_exactly",
                len(node.cards) * card_gib,
                sum(booked.values()),
                f"{count} pods x {share} GiB running on {node.node}, per card "
                f"{dict(sorted(booked.items()))} GiB; GiB booked in all",
            )
        )
    with allure.step("Created together, each pod sees exactly the cards the stack recorded for it"):
        _expect_own_cards(suite, node.node, running)
    if suite.profile.inspect_path:
        with allure.step("The extender's inspect agrees: each card's used is what the pods booked, within its total"):
            data = suite.inspect()
            devs = next((n.get("devs", []) for n in data.get("nodes", []) if n.get("name") == node.node), [])
            used = {str(d.get("id")): d.get("usedGPU", 0) for d in devs}
            over = [
                (d.get("id"), d.get("usedGPU"), d.get("totalGPU"))
                for d in devs
                if d.get("usedGPU", 0) > d.get("totalGPU", 0)
            ]
            suite.expect(
                v.none_of("inspect_used_within_total", over, "cards (id, used, total) whose used exceeds total")
            )
            suite.expect(
                v.equal(
                    "inspect_agrees_with_annotations",
                    dict(booked),
                    {c: g for c, g in used.items() if g},
                    "GiB used per card in the extender's inspect",
                )
            )
    with allure.step(f"One more pod of {share} GiB stays Pending with a reason"):
        suite.submit_share_pod_on(node.node, "one-more", share, None)
        reason = suite.wait_unschedulable("one-more", "one_more_pending")
        suite.expect(v.matches("one_more_pending", r"\S", reason, "scheduling reason"))


def test_a_burst_right_after_an_extender_restart_books_no_card_twice(suite):
    selector = suite.profile.extender_selector
    if not selector:
        placement = " (kube-scheduler itself places its claims)" if suite.profile.dra is not None else ""
        suite.not_applicable(
            "booked_after_restart", f"stack {suite.profile.name} has no scheduler extender to restart{placement}"
        )
        return
    node = suite.node
    card_gib = _card_size(node)
    share = _share_that_divides(card_gib)
    count = len(node.cards) * (card_gib // share)
    before = [f"before-{i}" for i in range(count // 2)]
    after = [f"after-{i}" for i in range(count - len(before))]
    with allure.step(f"{len(before)} pods of {share} GiB, created together, run on {node.node}"):
        suite.submit_share_pods_on_at_once(node.node, before, share, None)
        running = {name: suite.wait_running(name) for name in before}
    with allure.step("Restart the scheduler extender while they run"):
        suite.restart(selector)
    with allure.step(
        f"Right after, {len(after)} more pods of {share} GiB, created together, fill the rest of "
        f"the {len(node.cards)} cards of {card_gib} GiB"
    ):
        suite.submit_share_pods_on_at_once(node.node, after, share, None)
        running |= {name: suite.wait_running(name) for name in after}
    with allure.step("Per card, the pods from before and after the restart never exceed the card"):
        _expect_cards_not_overbooked(suite, running, share, card_gib, "booked_after_restart")
    with allure.step("Each pod sees exactly the cards the stack recorded for it"):
        _expect_own_cards(suite, node.node, running)
    with allure.step(f"One more pod of {share} GiB stays Pending with a reason"):
        suite.submit_share_pod_on(node.node, "one-more", share, None)
        reason = suite.wait_unschedulable("one-more", "after_restart_one_more_pending")
        suite.expect(v.matches("after_restart_one_more_pending", r"\S", reason, "scheduling reason"))
