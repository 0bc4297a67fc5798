"""Card selection rules, property-based: never over-commit, distinct cards, N/M exact."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpushare_stack.extender import selection
from gpushare_stack.extender.selection import Card

cards_strategy = st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=8).map(
    lambda sizes: [Card(i, g) for i, g in enumerate(sizes)]
)


@st.composite
def node_with_usage(draw):
    cards = draw(cards_strategy)
    used = {c.index: draw(st.integers(min_value=0, max_value=c.total_gib)) for c in cards}
    return cards, used


@settings(max_examples=200, deadline=None)
@given(node_with_usage(), st.integers(1, 9), st.integers(1, 20), st.sampled_from(selection.POLICIES))
def test_selection_fits_exactly_or_refuses(node, count, per_card, policy):
    cards, used = node
    chosen = selection.select_cards(cards, used, count, per_card, policy)
    fitting = [c for c in cards if c.total_gib - used[c.index] >= per_card]
    if chosen is None:
        assert len(fitting) < count
        assert selection.misfit("n", cards, used, count, per_card) is not None
        return
    assert selection.misfit("n", cards, used, count, per_card) is None
    assert len(chosen) == count and len(set(chosen)) == count  # M distinct cards
    by_index = {c.index: c for c in cards}
    for i in chosen:  # never over-commit: each card still has room for its N/M share
        assert used[i] + per_card <= by_index[i].total_gib


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(4, 32), min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(1, 4), st.integers(1, 8)), min_size=1, max_size=40),
    st.sampled_from(selection.POLICIES),
)
def test_sequence_of_placements_never_overcommits(sizes, requests, policy):
    cards = [Card(i, g) for i, g in enumerate(sizes)]
    used: dict[int, int] = {}
    for count, per_card in requests:
        chosen = selection.select_cards(cards, used, count, per_card, policy)
        if chosen is None:
            continue
        for i in chosen:
            used[i] = used.get(i, 0) + per_card
    for c in cards:
        assert used.get(c.index, 0) <= c.total_gib


def test_binpack_prefers_fullest_card_and_spread_emptiest():
    cards = [Card(0, 15), Card(1, 15), Card(2, 15)]
    used = {0: 2, 1: 10, 2: 0}
    assert selection.select_cards(cards, used, 1, 4, selection.BINPACK) == (1,)
    assert selection.select_cards(cards, used, 1, 4, selection.SPREAD) == (2,)
    assert selection.select_cards(cards, used, 2, 4, selection.BINPACK) == (0, 1)
    # card 1 has 5 free: 6 GiB does not fit there, binpack takes the next fullest
    assert selection.select_cards(cards, used, 2, 6, selection.BINPACK) == (0, 2)


def test_unhealthy_cards_are_never_chosen():
    cards = [Card(0, 15, healthy=False), Card(1, 15), Card(2, 15)]
    assert selection.select_cards(cards, {}, 2, 4) == (1, 2)
    assert selection.select_cards(cards, {}, 3, 4) is None
    bad = selection.misfit("n1", cards, {}, 3, 4)
    assert bad is not None and not bad.unresolvable and "2 healthy card(s)" in bad.reason


def test_misfit_reasons_name_rule_and_values():
    cards = [Card(i, 15) for i in range(4)]
    too_many = selection.misfit("gpu-node", cards, {}, 5, 1)
    assert too_many.unresolvable
    assert too_many.reason == "gpushare: aliyun.com/gpu-count=5 exceeds the 4 cards of node gpu-node"
    too_big = selection.misfit("gpu-node", cards, {}, 2, 16)
    assert too_big.unresolvable and "16 GiB per card" in too_big.reason
    busy = selection.misfit("gpu-node", cards, {0: 15, 1: 15, 2: 12}, 2, 4)
    assert not busy.unresolvable
    assert "1 healthy card(s) with 4 GiB free, needs 2" in busy.reason
    assert "aliyun.com/gpu-mem=8" in busy.reason


def test_scores_stay_in_extender_range():
    cards = [Card(0, 15), Card(1, 15)]
    for used in ({}, {0: 11}, {0: 11, 1: 11}):
        for policy in selection.POLICIES:
            s = selection.score(cards, used, 1, 4, policy)
            assert 0 <= s <= 10
    assert selection.score(cards, {0: 11}, 1, 4, selection.BINPACK) == 10  # fills card 0 exactly
    assert selection.score(cards, {}, 1, 4, selection.SPREAD) > selection.score(cards, {}, 1, 4, selection.BINPACK)
    assert selection.score(cards, {0: 15, 1: 15}, 1, 4) == 0
