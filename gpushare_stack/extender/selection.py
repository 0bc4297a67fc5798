"""Card selection: which M cards of one node give a pod N/M GiB each.

Pure functions over plain values, so the rules can be property-tested without a
cluster or a server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpushare_stack import contract

BINPACK = "binpack"
SPREAD = "spread"
POLICIES = (BINPACK, SPREAD)


@dataclass(frozen=True)
class Card:
    """One physical card as the scheduler sees it (sizes in whole GiB)."""

    index: int
    total_gib: int  # whole GiB; MiB under the hami-like flavor (gpushare_doubles/flavors)
    healthy: bool = True
    uuid: str = ""


@dataclass(frozen=True)
class Misfit:
    """Why a node cannot take a pod; ``unresolvable`` if it never could (capacity)."""

    reason: str
    unresolvable: bool


def free_gib(card: Card, used: Mapping[int, int]) -> int:
    return card.total_gib - used.get(card.index, 0)


def misfit(node: str, cards: Sequence[Card], used: Mapping[int, int], count: int, per_card_gib: int) -> Misfit | None:
    """None if ``count`` distinct healthy cards each have ``per_card_gib`` free."""
    if not cards:
        return Misfit(f"gpushare: node {node} has no {contract.RESOURCE_MEM} cards", True)
    if count > len(cards):
        return Misfit(
            f"gpushare: {contract.RESOURCE_COUNT}={count} exceeds the {len(cards)} cards of node {node}",
            True,
        )
    big_enough = fitting = 0
    get = used.get
    for c in cards:  # one plain loop: this runs for every failing node of every filter
        if c.total_gib >= per_card_gib:
            big_enough += 1
            if c.healthy and c.total_gib - get(c.index, 0) >= per_card_gib:
                fitting += 1
    if big_enough < count:
        return Misfit(
            f"gpushare: {per_card_gib} GiB per card on {count} cards exceeds node {node}: "
            f"only {big_enough} of its cards have {per_card_gib} GiB in total",
            True,
        )
    if fitting < count:
        return Misfit(
            f"gpushare: node {node} has {fitting} healthy card(s) with {per_card_gib} GiB free, "
            f"needs {count} ({contract.RESOURCE_MEM}={per_card_gib * count}, "
            f"{contract.RESOURCE_COUNT}={count})",
            False,
        )
    return None


def select_cards(
    cards: Sequence[Card],
    used: Mapping[int, int],
    count: int,
    per_card_gib: int,
    policy: str = BINPACK,
) -> tuple[int, ...] | None:
    """Indices of ``count`` distinct cards that each fit ``per_card_gib``, or None.

    binpack: the fitting cards with the least free memory (fills cards up, keeps
    whole cards free for big pods); spread: the most free. Ties go to the lower index.
    The result is sorted by index.
    """
    if policy not in POLICIES:
        raise ValueError(f"gpushare: placement policy must be one of {POLICIES}, got {policy!r}")
    if count < 1 or per_card_gib < 1:
        raise ValueError(f"gpushare: need count >= 1 and per-card GiB >= 1, got {count}, {per_card_gib}")
    fitting = [c for c in cards if c.healthy and free_gib(c, used) >= per_card_gib]
    if len(fitting) < count:
        return None
    sign = 1 if policy == BINPACK else -1
    fitting.sort(key=lambda c: (sign * free_gib(c, used), c.index))
    return tuple(sorted(c.index for c in fitting[:count]))


def score(
    cards: Sequence[Card],
    used: Mapping[int, int],
    count: int,
    per_card_gib: int,
    policy: str = BINPACK,
) -> int:
    """0..MaxExtenderPriority: how well the node suits the pod under ``policy``.

    binpack scores the node by how full its chosen cards would be afterwards, spread by
    how empty; a node that does not fit scores 0.
    """
    chosen = select_cards(cards, used, count, per_card_gib, policy)
    if chosen is None:
        return 0
    by_index = {c.index: c for c in cards}
    total = sum(by_index[i].total_gib for i in chosen)
    free_after = sum(free_gib(by_index[i], used) - per_card_gib for i in chosen)
    fullness = 1 - free_after / total if total else 0
    value = fullness if policy == BINPACK else 1 - fullness
    return max(0, min(contract.MAX_EXTENDER_PRIORITY, round(value * contract.MAX_EXTENDER_PRIORITY)))
