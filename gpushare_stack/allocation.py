"""A bound pod's cards, as written in (and read back from) its annotations."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpushare_stack import contract


class AllocationAnnotationError(ValueError):
    """A pod's allocation annotations are malformed (message names the annotation)."""


@dataclass(frozen=True)
class Allocation:
    """Cards a pod holds on ``node``: ``containers`` maps container index to
    {card index: GiB}; ``assume_time_ns`` orders pods for the device plugin."""

    uid: str
    namespace: str
    name: str
    node: str
    containers: Mapping[int, Mapping[int, int]]
    assume_time_ns: int

    @property
    def per_card(self) -> dict[int, int]:
        """Total GiB this pod holds on each card."""
        totals: dict[int, int] = {}
        for cards in self.containers.values():
            for card, gib in cards.items():
                totals[card] = totals.get(card, 0) + gib
        return totals

    @property
    def cards(self) -> tuple[int, ...]:
        return tuple(sorted(self.per_card))

    @property
    def total_gib(self) -> int:
        return sum(self.per_card.values())


def bind_annotations(allocation: Allocation) -> dict[str, str]:
    """Annotations the extender writes before the Binding (open gpushare + ACK forms)."""
    assume = str(allocation.assume_time_ns)
    ack = {str(c): {str(i): g for i, g in sorted(cards.items())} for c, cards in sorted(allocation.containers.items())}
    return {
        contract.ANN_IDX: ",".join(str(i) for i in allocation.cards),
        contract.ANN_POD: str(allocation.total_gib),
        contract.ANN_ASSUME_TIME: assume,
        contract.ANN_ASSIGNED: "false",
        contract.ANN_ACK_ALLOCATION: json.dumps(ack, separators=(",", ":")),
        contract.ANN_ACK_ASSIGNED: "false",
        contract.ANN_ACK_ASSUME_TIME: assume,
    }


def _int(value: str, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AllocationAnnotationError(f"gpushare: {what} must be an integer, got {value!r}") from None


def allocation_from_pod(pod: Mapping[str, Any]) -> Allocation | None:
    """The allocation a bound pod carries, or None if it has none (not ours, or not yet
    bound). Uses ACK's per-container annotation when present, else the open form."""
    meta = pod.get("metadata") or {}
    ann = meta.get("annotations") or {}
    node = (pod.get("spec") or {}).get("nodeName")
    if not node or contract.ANN_IDX not in ann:
        return None
    where = f"pod {meta.get('namespace')}/{meta.get('name')}"
    assume = _int(ann.get(contract.ANN_ASSUME_TIME, "0"), f"{contract.ANN_ASSUME_TIME} of {where}")
    containers: dict[int, dict[int, int]] = {}
    if contract.ANN_ACK_ALLOCATION in ann:
        raw = ann[contract.ANN_ACK_ALLOCATION]
        try:
            parsed = json.loads(raw)
            containers = {int(c): {int(i): int(g) for i, g in cards.items()} for c, cards in parsed.items()}
        except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
            raise AllocationAnnotationError(
                f"gpushare: {contract.ANN_ACK_ALLOCATION} of {where} must be "
                f'{{"<container>":{{"<card>":GiB}}}}, got {raw!r}'
            ) from None
    else:
        idx_raw = ann[contract.ANN_IDX]
        cards = [_int(i, f"{contract.ANN_IDX} of {where}") for i in idx_raw.split(",") if i.strip()]
        total = _int(ann.get(contract.ANN_POD, ""), f"{contract.ANN_POD} of {where}")
        if not cards or total % len(cards):
            raise AllocationAnnotationError(
                f"gpushare: {contract.ANN_POD}={total} of {where} does not split evenly over "
                f"{contract.ANN_IDX}={idx_raw!r}"
            )
        containers = {0: {i: total // len(cards) for i in cards}}
    return Allocation(
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        node=node,
        containers=containers,
        assume_time_ns=assume,
    )


def is_terminated(pod: Mapping[str, Any]) -> bool:
    """Succeeded or Failed pods hold no cards."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
