"""The seed's restrictions: N/M must be an integer; all M cards on one node.

A request that breaks a rule must not run: the API rejects it, or the pod stays
unscheduled and the reason names the rule. A valid multi-card pod gets M distinct
cards of the one node it runs on, and its container sees exactly those.
"""

from __future__ import annotations

import allure
import pytest

from gpushare_conformance.fixtures.framework import verdicts as v

pytestmark = [pytest.mark.e2e, pytest.mark.restrictions]

# What a reason must mention to name the rule (any stack's wording).
NON_INTEGER = r"N\s*/\s*M|integer|divisib|invalid replica"
TOO_MANY_CARDS = r"gpu-count|(card|gpu)s? (count|number)|not enough (card|gpu)s|exceeds the \d+ cards"
SHARE_ABOVE_CARD = r"per card|gpu-mem|(card|gpu) memory|insufficient.*mem"


def _expect_rejected(suite, name: str, total: int, cards: int | None, rule: str, pattern: str) -> None:
    with allure.step(f"Submit {total} GiB over {cards} card(s): breaks '{rule}'"):
        reason = suite.rejection_reason(name, total, cards)
    with allure.step("The pod stays unscheduled and the reason names the rule"):
        suite.expect(v.matches(f"reason_names_rule[{rule}]", pattern, reason, "scheduling reason"))


@pytest.mark.capacity(cards=0)
def test_gpu_mem_not_divisible_by_gpu_count_is_not_scheduled(suite):
    if suite.profile.per_card_mib:
        pytest.skip(f"stack profile {suite.profile.name!r} asks memory per card: N/M cannot be fractional")
    if not suite.profile.multi_card:
        pytest.skip(f"stack profile {suite.profile.name!r} has no multi-card sharing")
    if suite.max_cards < 2:
        pytest.skip("needs a node with 2 cards, so only the integer rule can reject the pod")
    _expect_rejected(suite, "not-integer", 3, 2, "N/M must be an integer", NON_INTEGER)


@pytest.mark.capacity(cards=0)
def test_gpu_count_above_any_node_cards_is_not_scheduled(suite):
    cards = suite.max_cards + 1
    if suite.profile.max_cards is not None and cards > suite.profile.max_cards:
        pytest.skip(f"stack profile {suite.profile.name!r} cannot express {cards} cards per pod")
    _expect_rejected(suite, "too-many-cards", cards, cards, "all M cards on one node", TOO_MANY_CARDS)


@pytest.mark.capacity(cards=0)
def test_per_card_share_above_card_size_is_not_scheduled(suite):
    per_card = suite.node.card_gib + 1
    # With 3+ cards the pod total stays within the node's total, so only the per-card
    # rule (not plain capacity) can turn it away.
    cards = 2 if suite.max_cards >= 3 and suite.profile.multi_card else None
    _expect_rejected(suite, "share-above-card", per_card * (cards or 1), cards, "N/M fits on a card", SHARE_ABOVE_CARD)


@pytest.mark.capacity(cards="all")
def test_all_cards_of_a_pod_are_distinct_and_on_its_node(suite):
    cards = suite.profile.cards_for(len(suite.node.cards))
    if cards < 2:
        pytest.skip("needs a node with 2 or more cards")
    with allure.step(f"Submit a pod over all {cards} cards of the largest node"):
        pod = suite.submit_share_pod("all-cards", cards, cards)
        obj = suite.wait_running(pod)
    node = suite.node_of(obj)
    with allure.step("The allocation names M distinct cards of the pod's node"):
        allocated = suite.allocated_cards(obj)
        known = {str(c.index) for c in node.cards}
        suite.expect(v.distinct("cards_distinct", allocated, cards, "allocated cards"))
        suite.expect(v.subset("cards_on_node", allocated, known, f"cards of node {node.node}"))
    with allure.step("The container sees exactly those cards"):
        env = suite.env(pod)
        visible = [v.strip() for v in env.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        suite.expect(v.equal("visible_devices", sorted(allocated), sorted(visible), "NVIDIA_VISIBLE_DEVICES"))
        report = suite.nvidia_smi_exec(pod)
        suite.expect(v.equal("nvidia_smi_cards", cards, len(report.gpus), "cards nvidia-smi lists"))
