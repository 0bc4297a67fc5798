"""The seed's restrictions: N/M must be an integer; all M cards on one node.

A request that breaks a rule must not run: the API rejects it, or the pod stays
unscheduled and the reason names the rule. A valid multi-card pod gets M distinct
cards of the one node it runs on, and its container sees exactly those.
"""

from __future__ import annotations

import allure
import pytest

from gpushare_conformance.allocation import DEFAULT_TOLERANCE, card_totals_mib
from gpushare_conformance.fixtures.framework import submit
from gpushare_conformance.fixtures.framework import verdicts as v

pytestmark = [pytest.mark.e2e, pytest.mark.restrictions]

# What a reason must mention to name the rule (any stack's wording).
NON_INTEGER = r"N\s*/\s*M|integer|divisib|invalid replica"
# HAMi's scheduler says NodeInsufficientDevice.
TOO_MANY_CARDS = (
    r"gpu-count|(card|gpu)s? (count|number)|not enough (card|gpu)s|exceeds the \d+ cards|InsufficientDevice"
)
SHARE_ABOVE_CARD = r"per card|gpu-mem|(card|gpu) memory|insufficient.*mem"


# A DRA stack is judged by kube-scheduler alone, which gives one reason for any claim
# no node can serve; the positive control before each refusal shows it is the rule.
DRA_REFUSAL = submit.CLAIMS_NOT_ALLOCATED.pattern


def _expect_rejected(suite, name: str, total: int, cards: int | None, rule: str, pattern: str) -> None:
    with allure.step(f"Submit {total} GiB over {cards} card(s): breaks '{rule}'"):
        reason = suite.rejection_reason(name, total, cards, verdict=f"reason_names_rule[{rule}]")
    with allure.step("The pod stays unscheduled and the reason names the rule"):
        if suite.profile.dra is not None:
            pattern, what = DRA_REFUSAL, "scheduling reason (DRA: the claims fit no node)"
        else:
            what = "scheduling reason"
        suite.expect(v.matches(f"reason_names_rule[{rule}]", pattern, reason, what))


@pytest.mark.capacity(cards=2)
def test_gpu_mem_not_divisible_by_gpu_count_is_not_scheduled(suite):
    if suite.max_cards < 2:
        pytest.skip("needs a node with 2 cards, so only the integer rule can reject the pod")
    if suite.profile.per_card_mib:
        _per_card_spelling_gives_the_fraction(suite)
        return
    if suite.profile.dra is not None:
        _dra_gives_what_it_consumes(suite)
        return
    with allure.step("Positive control: 2 GiB over 2 cards (N/M = 1) is placed"):
        suite.positive_control("integer", 2, 2, "N/M an integer")
    _expect_rejected(suite, "not-integer", 3, 2, "N/M must be an integer", NON_INTEGER)


def _per_card_spelling_gives_the_fraction(suite) -> None:
    """A stack that asks memory per card in MiB cannot be asked a non-integer N/M in GiB:
    3 GiB over 2 cards is spelled 1536 MiB per card. The rule is then moot; what the
    stack must do is give exactly that on each card (or refuse it), never round."""
    share_mib = 3 * 1024 // 2
    with allure.step(f"3 GiB over 2 cards, spelled {share_mib} MiB per card: the stack gives that or refuses"):
        pod = suite.submit_share_pod("fraction", 3, 2)
        obj = suite.wait_running(pod)
        report = suite.nvidia_smi_exec(pod)
        suite.expect(v.equal("card_count", 2, len(report.gpus), "cards nvidia-smi lists"))
        for visible, seen in sorted(card_totals_mib(report).items()):
            physical = suite.physical_mib(obj, visible)
            high = min(int(share_mib * (1 + DEFAULT_TOLERANCE)), (physical or 1 << 40) - 1)
            suite.expect(
                v.within(
                    f"per_card_share[card {visible}]",
                    seen,
                    share_mib,
                    high,
                    "MiB",
                    f"{suite.profile.memory_resource} asks MiB per card: N/M = 1.5 GiB is a valid request, "
                    f"and card {visible} shows {seen} MiB for it",
                )
            )


def _dra_gives_what_it_consumes(suite) -> None:
    """Under DRA a claim may ask any quantity: 3 GiB over 2 cards is two requests of
    1536Mi. The driver's request policy decides what a share consumes (a stack may
    round up to its step or refuse); the rule becomes: the pod is refused, or each card
    shows at least what was asked and no more than what the claim consumed of it, so
    the scheduler's books and the pod's view agree."""
    asked_mib = 3 * 1024 // 2
    with allure.step("Positive control: 2 GiB over 2 cards (N/M = 1) is placed"):
        suite.positive_control("integer", 2, 2, "N/M an integer")
    with allure.step(f"3 GiB over 2 cards: two DRA requests of {asked_mib}Mi each"):
        try:
            pod = suite.submit_share_pod("fraction", 3, 2)
        except submit.SubmitError as exc:  # refused at admission: a refusal the stack chose
            suite.expect(v.matches("fraction_refused_or_given", r"API rejected", str(exc)[-300:], "admission"))
            return
        try:
            obj = suite.wait_running(pod)
        except AssertionError as exc:
            # Only the scheduler turning it away is a refusal; a pod that failed to start
            # or a prepare error is the stack failing, not choosing.
            state = str(exc)[-400:]
            suite.expect(
                v.matches(
                    "fraction_refused_or_given",
                    rf"unschedulable: .*{DRA_REFUSAL}",
                    state,
                    "why the pod did not run (a refusal is the scheduler's)",
                )
            )
            return
    # The container's cards come in the order of the claim's requests (gpu-0, gpu-1).
    consumed = [share.consumed_mib for share in suite.claim_shares(obj)]
    report = suite.nvidia_smi_exec(pod)
    suite.expect(v.equal("card_count", 2, len(report.gpus), "cards nvidia-smi lists"))
    for visible, seen in sorted(card_totals_mib(report).items()):
        took = consumed[visible] if visible < len(consumed) else None
        high = int((took or asked_mib) * (1 + DEFAULT_TOLERANCE))
        suite.expect(
            v.within(
                f"per_card_share[card {visible}]",
                seen,
                asked_mib,
                high,
                "MiB",
                f"DRA takes any quantity: asked {asked_mib} MiB on card {visible}, the claim consumed "
                f"{took if took is not None else 'nothing recorded'} MiB of it, and the card shows {seen} MiB",
            )
        )


@pytest.mark.capacity(cards="all")
def test_gpu_count_above_any_node_cards_is_not_scheduled(suite):
    cards = suite.max_cards + 1
    with allure.step(f"Positive control: 1 GiB on each of the node's {len(suite.node.cards)} cards is placed"):
        suite.positive_control("all-cards", len(suite.node.cards), len(suite.node.cards), "every card of a node")
    _expect_rejected(suite, "too-many-cards", cards, cards, "all M cards on one node", TOO_MANY_CARDS)


@pytest.mark.capacity(cards=2)
def test_per_card_share_above_card_size_is_not_scheduled(suite):
    per_card = suite.node.card_gib + 1
    # With 3+ cards the pod total stays within the node's total, so only the per-card
    # rule (not plain capacity) can turn it away.
    cards = 2 if suite.max_cards >= 3 and suite.profile.multi_card else None
    with allure.step(f"Positive control: a whole card ({suite.node.card_gib} GiB) on {cards or 1} card(s) is placed"):
        suite.positive_control("whole-card", suite.node.card_gib * (cards or 1), cards, "a share of one whole card")
    _expect_rejected(suite, "share-above-card", per_card * (cards or 1), cards, "N/M fits on a card", SHARE_ABOVE_CARD)


@pytest.mark.capacity(cards="all")
def test_all_cards_of_a_pod_are_distinct_and_on_its_node(suite):
    cards = len(suite.node.cards)
    if cards < 2:
        pytest.skip(f"needs a node with 2 or more cards; {suite.node.node} has {cards}")
    with allure.step(f"Submit a pod over all {cards} cards of the largest node"):
        pod = suite.submit_share_pod("all-cards", cards, cards)
        obj = suite.wait_running(pod)
    node = suite.node_of(obj)
    with suite.gathering():
        with allure.step("The allocation names M distinct cards of the pod's node"):
            allocated = suite.allocated_cards(obj)
            known = suite.card_ids(node)
            suite.expect(v.distinct("cards_distinct", allocated, cards, "allocated cards"))
            suite.expect(v.subset("cards_on_node", allocated, known, f"cards of node {node.node}"))
        with allure.step("The container sees exactly those cards"):
            env = suite.env(pod)
            visible = [v.strip() for v in env.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if v.strip()]

            # Either side may name a card by index or UUID: compare the cards they name.
            def index_of(ident: str) -> str:
                card = suite.card_of(node, ident)
                return str(card.index) if card is not None else ident

            suite.expect(
                v.equal(
                    "visible_devices",
                    sorted(map(index_of, allocated)),
                    sorted(map(index_of, visible)),
                    "NVIDIA_VISIBLE_DEVICES (as card indices)",
                )
            )
            report = suite.nvidia_smi_exec(pod)
            suite.expect(v.equal("nvidia_smi_cards", cards, len(report.gpus), "cards nvidia-smi lists"))
