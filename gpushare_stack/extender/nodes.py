"""A node's cards, read from the device plugin's node annotation (or capacity).

What decides a node's cards is its *card source*: the annotation string and the two
capacity values. The extender keys its parsed cards by that source, so a node object
whose source is unchanged is never parsed again (the informer's heartbeats, and the
whole Node objects a scheduler without nodeCacheCapable sends with every filter).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from gpushare_stack import contract
from gpushare_stack.extender.selection import Card


class NodeCardsError(ValueError):
    """The node's card annotation or capacity is malformed (message names both)."""


class _Missing:
    """A capacity key the node does not have (distinct from a value of null)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

# (annotation string or None, capacity gpu-mem or MISSING, capacity gpu-count or MISSING);
# when the annotation is there the capacity does not count and both are MISSING.
CardSource = tuple[Any, Any, Any]


class NodeSource(NamedTuple):
    """A node as the filter needs it: its name and its card source."""

    name: str
    source: CardSource


def card_source(annotation: Any, mem: Any = MISSING, count: Any = MISSING) -> CardSource:
    """The card source of a node with this annotation (None: absent) and capacity."""
    if annotation is not None:
        return (annotation, MISSING, MISSING)
    return (None, mem, count)


def node_source(node: Mapping[str, Any]) -> NodeSource:
    """Name and card source of a node object (API JSON form)."""
    meta = node.get("metadata") or {}
    annotation = (meta.get("annotations") or {}).get(contract.NODE_CARDS_ANNOTATION)
    capacity = (node.get("status") or {}).get("capacity") or {}
    return NodeSource(
        str(meta.get("name", "")),
        card_source(
            annotation, capacity.get(contract.RESOURCE_MEM, MISSING), capacity.get(contract.RESOURCE_COUNT, MISSING)
        ),
    )


def _quantity_int(value: Any, what: str) -> int:
    text = str(value).strip()
    if not text.isdigit():
        raise NodeCardsError(f"gpushare: {what} must be an integer, got {value!r}")
    return int(text)


def cards_from_source(name: str, source: CardSource) -> tuple[Card, ...]:
    """The cards a card source describes (``name`` only labels the messages)."""
    name = name or "?"
    raw, mem_value, count_value = source
    if raw is not None:
        where = f"annotation {contract.NODE_CARDS_ANNOTATION} of node {name}"
        try:
            entries = json.loads(raw)
        except (json.JSONDecodeError, TypeError) as exc:
            raise NodeCardsError(f"gpushare: {where} is not JSON ({exc}): {raw!r}") from None
        if not isinstance(entries, list):
            raise NodeCardsError(f"gpushare: {where} must be a JSON list, got {raw!r}")
        cards = []
        for entry in entries:
            if (
                not isinstance(entry, dict)
                or not isinstance(entry.get("index"), int)
                or not isinstance(entry.get("memory_gib"), int)
            ):
                raise NodeCardsError(f"gpushare: {where}: each card needs integer index and memory_gib, got {entry!r}")
            cards.append(Card(entry["index"], entry["memory_gib"], bool(entry.get("healthy", True))))
        if len({c.index for c in cards}) != len(cards):
            raise NodeCardsError(f"gpushare: {where} lists a card index twice: {raw!r}")
        return tuple(sorted(cards, key=lambda c: c.index))
    if mem_value is MISSING or count_value is MISSING:
        return ()
    mem = _quantity_int(mem_value, f"capacity {contract.RESOURCE_MEM} of node {name}")
    count = _quantity_int(count_value, f"capacity {contract.RESOURCE_COUNT} of node {name}")
    if count == 0:
        return ()
    return tuple(Card(i, mem // count) for i in range(count))


def cards_from_node(node: Mapping[str, Any]) -> tuple[Card, ...]:
    """The node's cards: the ``gpushare.conformance.io/cards`` annotation, else equal
    cards of capacity(gpu-mem) / capacity(gpu-count); empty if the node has neither."""
    name, source = node_source(node)
    return cards_from_source(name, source)
