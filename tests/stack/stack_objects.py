"""Pod and node objects in API JSON form (camelCase), as the scheduler sends them."""

from __future__ import annotations

import json
import uuid as uuidlib
from typing import Any

from gpushare_stack import contract


def pod(
    name: str,
    gib: int | list[int],
    count: int | None = None,
    namespace: str = "default",
    node: str | None = None,
    annotations: dict[str, str] | None = None,
    phase: str = "Pending",
    uid: str | None = None,
) -> dict[str, Any]:
    gibs = gib if isinstance(gib, list) else [gib]
    labels = {"app": name}
    if count is not None:
        labels[contract.LABEL_COUNT] = str(count)
    spec: dict[str, Any] = {
        "containers": [
            {"name": f"c{i}", "image": "busybox", "resources": {"limits": {contract.RESOURCE_MEM: str(g)}}}
            for i, g in enumerate(gibs)
        ],
        "restartPolicy": "Never",
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or str(uuidlib.uuid4()),
            "labels": labels,
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def node(name: str, cards: list[int], healthy: list[bool] | None = None, annotate: bool = True) -> dict[str, Any]:
    """A node with cards of the given GiB sizes (16160 MiB = 15 GiB is a V100-16GB)."""
    healthy = healthy or [True] * len(cards)
    entries = [
        {"index": i, "uuid": f"GPU-{name}-{i}", "memory_mib": g * 1024 + 800, "memory_gib": g, "healthy": h}
        for i, (g, h) in enumerate(zip(cards, healthy))
    ]
    meta: dict[str, Any] = {"name": name, "labels": {contract.NODE_LABEL: "true"}}
    if annotate:
        meta["annotations"] = {contract.NODE_CARDS_ANNOTATION: json.dumps(entries)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "status": {"capacity": {contract.RESOURCE_MEM: str(sum(cards)), contract.RESOURCE_COUNT: str(len(cards))}},
    }
