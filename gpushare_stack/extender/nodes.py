"""A node's cards, read from the device plugin's node annotation (or capacity)."""

from __future__ import annotations

import json
from typing import Any, Mapping

from gpushare_stack import contract
from gpushare_stack.extender.selection import Card


class NodeCardsError(ValueError):
    """The node's card annotation or capacity is malformed (message names both)."""


def _quantity_int(value: Any, what: str) -> int:
    text = str(value).strip()
    if not text.isdigit():
        raise NodeCardsError(f"gpushare: {what} must be an integer, got {value!r}")
    return int(text)


def cards_from_node(node: Mapping[str, Any]) -> tuple[Card, ...]:
    """The node's cards: the ``gpushare.conformance.io/cards`` annotation, else equal
    cards of capacity(gpu-mem) / capacity(gpu-count); empty if the node has neither."""
    meta = node.get("metadata") or {}
    name = meta.get("name", "?")
    raw = (meta.get("annotations") or {}).get(contract.NODE_CARDS_ANNOTATION)
    if raw is not None:
        where = f"annotation {contract.NODE_CARDS_ANNOTATION} of node {name}"
        try:
            entries = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise NodeCardsError(f"gpushare: {where} is not JSON ({exc}): {raw!r}") from None
        if not isinstance(entries, list):
            raise NodeCardsError(f"gpushare: {where} must be a JSON list, got {raw!r}")
        cards = []
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("index"), int) \
                    or not isinstance(entry.get("memory_gib"), int):
                raise NodeCardsError(
                    f"gpushare: {where}: each card needs integer index and memory_gib, got {entry!r}"
                )
            cards.append(Card(entry["index"], entry["memory_gib"], bool(entry.get("healthy", True))))
        if len({c.index for c in cards}) != len(cards):
            raise NodeCardsError(f"gpushare: {where} lists a card index twice: {raw!r}")
        return tuple(sorted(cards, key=lambda c: c.index))
    capacity = (node.get("status") or {}).get("capacity") or {}
    if contract.RESOURCE_MEM not in capacity or contract.RESOURCE_COUNT not in capacity:
        return ()
    mem = _quantity_int(capacity[contract.RESOURCE_MEM], f"capacity {contract.RESOURCE_MEM} of node {name}")
    count = _quantity_int(capacity[contract.RESOURCE_COUNT], f"capacity {contract.RESOURCE_COUNT} of node {name}")
    if count == 0:
        return ()
    return tuple(Card(i, mem // count) for i in range(count))
