"""Binds the device plugin could confuse wait for each other.

The kubelet's Allocate names devices, not the pod: the device plugin finds the pod by
its gpu-mem per container among the node's pods that are bound and not yet allocated,
and of several such pods takes the one bound first. The kubelet, though, admits pods
in its own order (a batch sorted by creation time, with one-second timestamps), so
pods with the same request created together could be served each other's cards: the
limits match, the cards do not. The extender therefore binds a pod to a node only when
no pod there with a container of the same gpu-mem still waits for its Allocate (its
"twins"); the scheduler retries the pod after a back-off. Pods with different requests
are told apart by the Allocate's device count and are never held back.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from gpushare_stack import contract
from gpushare_stack.request import ShareRequestError, container_gib

# A pod bound this long ago and still not allocated is not waited for (deleted before
# its containers were made, refused by the kubelet, ...).
STALE_AFTER_S = 300.0


def container_sizes(pod: Mapping[str, Any]) -> frozenset[int]:
    """The gpu-mem of each container that asks some (what its Allocates will ask)."""
    sizes = set()
    for container in (pod.get("spec") or {}).get("containers") or []:
        try:
            gib = container_gib(container)
        except ShareRequestError:
            continue
        if gib > 0:
            sizes.add(gib)
    return frozenset(sizes)


def waiting_twins(pods: Iterable[Mapping[str, Any]], me: Mapping[str, Any], now: float) -> list[str]:
    """``namespace/name`` of the pods (of a node) that wait for their Allocate and ask a
    container size ``me`` asks too."""
    mine = container_sizes(me)
    my_uid = str((me.get("metadata") or {}).get("uid", ""))
    twins = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        ann = meta.get("annotations") or {}
        if str(meta.get("uid", "")) == my_uid or meta.get("deletionTimestamp"):
            continue
        if (pod.get("status") or {}).get("phase") != "Pending" or ann.get(contract.ANN_ASSIGNED) != "false":
            continue
        assumed = str(ann.get(contract.ANN_ASSUME_TIME, ""))
        if not assumed.isdigit() or now - int(assumed) / 1e9 > STALE_AFTER_S:
            continue
        if mine & container_sizes(pod):
            twins.append(f"{meta.get('namespace')}/{meta.get('name')}")
    return sorted(twins)


class NodeBinds:
    """One bind at a time per node in this process (the extender runs as one replica),
    so that a bind's check for twins sees every bind made before it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def acquire(self, node: str) -> None:
        with self._guard:
            lock = self._locks.setdefault(node, threading.Lock())
        lock.acquire()

    def release(self, node: str) -> None:
        with self._guard:
            lock = self._locks.get(node)
        if lock is not None and lock.locked():
            lock.release()
