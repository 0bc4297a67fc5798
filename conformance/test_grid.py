"""The allocation grid: N GiB over M cards gives N/M GiB on each of M cards.

Each case is a per-card share and a card count; cases the largest GPU node cannot
hold are skipped with the node's size. `cards=None` is single-GPU sharing written the
seed's way, with no gpu-count label. `"card-1"` is one GiB less than a whole card (the most a share can be while
still being told apart from the physical size).
"""

from __future__ import annotations

import allure
import pytest

from gpushare_conformance.allocation import card_totals_mib, check_card_count, check_card_total
from gpushare_conformance.fixtures.framework import verdicts as v

pytestmark = [pytest.mark.e2e, pytest.mark.grid]

GRID = [
    (1, None),
    (2, None),
    (3, 1),
    ("card-1", 1),
    (1, 2),
    (3, 2),
    (2, 3),
    (1, 4),
    (4, 4),
    ("card-1", 2),
]


@pytest.mark.parametrize(
    ("per_card", "cards"),
    [pytest.param(p, c, id=f"{p}GiBx{c or 'nolabel'}", marks=pytest.mark.capacity(cards=c or 1)) for p, c in GRID],
)
def test_n_gib_over_m_cards_gives_n_over_m_on_each_card(suite, per_card, cards):
    count = cards or 1
    per_card_gib = suite.node.card_gib - 1 if per_card == "card-1" else per_card
    if count > suite.max_cards:
        pytest.skip(f"needs {count} cards on one node; the largest GPU node has {suite.max_cards}")
    if per_card_gib > suite.node.card_gib:
        pytest.skip(f"needs {per_card_gib} GiB per card; the node's cards hold {suite.node.card_gib} GiB")
    total = per_card_gib * count
    with allure.step(f"Submit a pod asking {total} GiB over {cards or 'no gpu-count label'}"):
        pod = suite.submit_share_pod("grid", total, cards)
        obj = suite.wait_running(pod)
    with suite.gathering():
        with allure.step(f"The pod got {count} distinct card(s) on its node"):
            allocated = suite.allocated_cards(obj)
            suite.expect(v.distinct("allocated_cards", allocated, count, "cards in the allocation annotation"))
        with allure.step(f"nvidia-smi lists {count} card(s) of about {per_card_gib} GiB"):
            report = suite.nvidia_smi_exec(pod)
            suite.expect(check_card_count(len(report.gpus), count))
            for visible, seen in sorted(card_totals_mib(report).items()):
                suite.expect(check_card_total(seen, per_card_gib, suite.physical_mib(obj, visible)))
