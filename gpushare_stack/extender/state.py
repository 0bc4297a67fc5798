"""The extender's view of the cluster: nodes' cards and the pods holding them.

Fed by the informer (or directly, in tests). One lock guards it; ``assume`` reserves
cards under that lock before any API call, so concurrent binds never over-commit a
card, and the state is rebuilt from pod annotations at start, so a restart never
double-books one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpushare_stack.allocation import Allocation, AllocationAnnotationError
from gpushare_stack.extender import selection
from gpushare_stack.extender.errors import BindError, NodeNotKnown
from gpushare_stack.extender.nodes import CardSource, NodeCardsError, NodeSource
from gpushare_stack.extender.policy import ReferenceExtender
from gpushare_stack.extender.selection import Card, Misfit
from gpushare_stack.request import ShareRequest, ShareRequestError

log = logging.getLogger(__name__)


@dataclass
class _Node:
    cards: tuple[Card, ...] = ()
    error: str | None = None
    source: CardSource | None = None  # what the cards were read from (nodes.card_source)


def _read_node(flavor: Any, name: str, source: CardSource) -> _Node:
    try:
        return _Node(cards=flavor.cards_from_source(name, source), source=source)
    except NodeCardsError as exc:
        return _Node(error=str(exc), source=source)


@dataclass
class FilterOutcome:
    """Nodes that fit, and reasons for the rest (resolvable or not)."""

    fits: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)


def _pod_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


class ClusterState:
    """Cards per node, allocations per pod, and the usage they add up to."""

    def __init__(
        self,
        policy: str = selection.BINPACK,
        clock: Callable[[], int] = time.time_ns,
        flavor: ReferenceExtender | None = None,
    ) -> None:
        if policy not in selection.POLICIES:
            raise ValueError(f"gpushare: --policy must be one of {selection.POLICIES}, got {policy!r}")
        self.policy = policy
        # Every answer where a variant of the stack differs (extender/policy.py):
        # requests, node cards, fit reasons, annotations; the reference by default.
        self.flavor = flavor if flavor is not None else ReferenceExtender()
        self._share_request = self.flavor.share_request
        self._clock = clock
        self._lock = threading.RLock()
        self._nodes: dict[str, _Node] = {}
        self._allocs: dict[str, Allocation] = {}
        self._used: dict[str, dict[int, int]] = {}
        # Free GiB of each node's healthy cards, largest first: the filter's fast path
        # (M cards fit iff the M-th largest free value holds the share).
        self._free_desc: dict[str, list[int]] = {}
        # Reasons already worked out per node and (count, share); dropped on any change.
        self._misfits: dict[str, dict[tuple[int, int], Misfit | None]] = {}
        # Cards of node objects sent in filter requests whose card source differs from
        # the informer's (or that it does not know), by name: parsed once per source.
        self._object_nodes: dict[str, _Node] = {}
        self._pods: dict[tuple[str, str], dict[str, Any]] = {}
        self._pod_errors: dict[str, str] = {}
        # Pods whose allocation names cards of a node not read yet (hami-like names
        # cards by UUID): read again once that node arrives.
        self._waiting: dict[str, dict[str, Any]] = {}
        self.synced = threading.Event()

    # ---- feeding -------------------------------------------------------------
    def upsert_node(self, node: Mapping[str, Any]) -> None:
        name, source = self.flavor.node_source(node)
        with self._lock:
            known = self._nodes.get(name)
            if known is not None and known.source == source:
                return  # same cards (a status heartbeat, a label change)
            self._nodes[name] = _read_node(self.flavor, name, source)
            self._refresh_free(name)
            self._retry_waiting()

    def _cards_of(self, name: str) -> tuple[Card, ...] | None:
        entry = self._nodes.get(name)
        return None if entry is None or entry.error else entry.cards

    def _retry_waiting(self) -> None:
        for pod in list(self._waiting.values()):
            self.upsert_pod(pod)

    def remove_node(self, name: str) -> None:
        with self._lock:
            self._nodes.pop(name, None)
            self._free_desc.pop(name, None)
            self._misfits.pop(name, None)

    def _refresh_free(self, name: str) -> None:
        self._misfits.pop(name, None)
        entry = self._nodes.get(name)
        if entry is None or entry.error:
            self._free_desc.pop(name, None)
            return
        used = self._used.get(name, {})
        self._free_desc[name] = sorted(
            (c.total_gib - used.get(c.index, 0) for c in entry.cards if c.healthy), reverse=True
        )

    def upsert_pod(self, pod: Mapping[str, Any]) -> None:
        """Record a pod's latest state. Its annotations are authoritative once it is
        bound; before that an allocation assumed by ``assume`` is kept."""
        uid = str((pod.get("metadata") or {}).get("uid", ""))
        key = _pod_key(pod)
        with self._lock:
            if self.flavor.gives_cards_back(pod):
                self._pods.pop(key, None)
                self._waiting.pop(uid, None)
                self._release(uid)
                return
            self._pods[key] = dict(pod)
            self._waiting.pop(uid, None)
            try:
                alloc = self.flavor.allocation_from_pod(pod, self._cards_of)
            except NodeNotKnown:
                self._waiting[uid] = dict(pod)
                return
            except AllocationAnnotationError as exc:
                self._pod_errors[uid] = str(exc)
                log.error("%s", exc)
                return
            self._pod_errors.pop(uid, None)
            if alloc is not None:
                self._release(uid)
                self._hold(alloc)

    def remove_pod(self, pod: Mapping[str, Any]) -> None:
        uid = str((pod.get("metadata") or {}).get("uid", ""))
        with self._lock:
            self._pods.pop(_pod_key(pod), None)
            self._pod_errors.pop(uid, None)
            self._waiting.pop(uid, None)
            self._release(uid)

    def replace_nodes(self, nodes: Iterable[Mapping[str, Any]]) -> None:
        """Relist: the given nodes are all there is."""
        with self._lock:
            old = self._nodes
            self._nodes = {}
            self._free_desc.clear()
            self._misfits.clear()
            for node in nodes:
                name, source = self.flavor.node_source(node)
                known = old.get(name)
                if known is None or known.source != source:
                    known = _read_node(self.flavor, name, source)
                self._nodes[name] = known
                self._refresh_free(name)
            self._retry_waiting()

    def replace_pods(self, pods: Iterable[Mapping[str, Any]]) -> None:
        """Relist: rebuild every allocation from the pods' annotations."""
        with self._lock:
            assumed = {uid: a for uid, a in self._allocs.items()}
            self._pods.clear()
            self._allocs.clear()
            self._used.clear()
            self._pod_errors.clear()
            self._waiting.clear()
            for name in self._nodes:
                self._refresh_free(name)
            for pod in pods:
                self.upsert_pod(pod)
            # Keep reservations of binds still in flight (pod listed, not yet bound).
            live = {str((p.get("metadata") or {}).get("uid", "")) for p in self._pods.values()}
            for uid, alloc in assumed.items():
                if uid in live and uid not in self._allocs:
                    self._hold(alloc)

    def _hold(self, alloc: Allocation) -> None:
        self._allocs[alloc.uid] = alloc
        used = self._used.setdefault(alloc.node, {})
        for card, gib in alloc.per_card.items():
            used[card] = used.get(card, 0) + gib
        self._refresh_free(alloc.node)

    def _release(self, uid: str) -> None:
        alloc = self._allocs.pop(uid, None)
        if alloc is None:
            return
        used = self._used.get(alloc.node, {})
        for card, gib in alloc.per_card.items():
            used[card] = used.get(card, 0) - gib
            if used[card] <= 0:
                used.pop(card)
        self._refresh_free(alloc.node)

    # ---- queries -------------------------------------------------------------
    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            pod = self._pods.get((namespace, name))
            return dict(pod) if pod is not None else None

    def allocation(self, uid: str) -> Allocation | None:
        with self._lock:
            return self._allocs.get(uid)

    def used(self, node: str) -> dict[int, int]:
        with self._lock:
            return dict(self._used.get(node, {}))

    def _node_misfit(self, name: str, request: ShareRequest, entry: _Node | None) -> Misfit | None:
        if entry is None:
            return Misfit(f"gpushare: node {name} is not in the extender's cache", False)
        if entry.error:
            return Misfit(entry.error, True)
        return self.flavor.misfit(name, entry.cards, self._used.get(name, {}), request.count, request.per_card_gib)

    def _object_node(self, ref: NodeSource) -> _Node:
        """Cards of a node object the informer does not hold in this form (lock held)."""
        entry = self._object_nodes.get(ref.name)
        if entry is None or entry.source != ref.source:
            if len(self._object_nodes) > 2 * len(self._nodes) + 1024:
                self._object_nodes.clear()  # names long gone; bound the cache
            entry = self._object_nodes[ref.name] = _read_node(self.flavor, ref.name, ref.source)
        return entry

    def filter(self, pod: Mapping[str, Any], nodes: Sequence[str | NodeSource | Mapping[str, Any]]) -> FilterOutcome:
        """Split ``nodes``: names (nodeCacheCapable), or the scheduler's node objects,
        as mappings or as ``NodeSource``. A node object whose cards read as the
        informer's gets the very same verdict as its name; any other is judged on its
        own cards and the pods the extender knows on that node."""
        outcome = FilterOutcome()
        refs = [n if isinstance(n, (str, NodeSource)) else self.flavor.node_source(n) for n in nodes]
        names = [r if isinstance(r, str) else r.name for r in refs]
        try:
            if not self.flavor.is_share_pod(pod):  # not ours: the extender has no say over it
                outcome.fits = list(names)
                return outcome
            request = self._share_request(pod)
        except ShareRequestError as exc:
            outcome.unresolvable = {n: str(exc) for n in names}
            return outcome
        count, share = request.count, request.per_card_gib
        refusal = self.flavor.refusal_for_every_node(count, share)
        if refusal is not None:
            outcome.failed = dict.fromkeys(names, refusal)
            return outcome
        with self._lock:
            nodes_known, free_desc, misfits, key = self._nodes, self._free_desc, self._misfits, (count, share)
            pooled = self.flavor.cards_free_anywhere(free_desc, share)
            for name, ref in zip(names, refs, strict=True):
                entry = nodes_known.get(name)
                if pooled >= count and any(f >= share for f in free_desc.get(name, ())):
                    outcome.fits.append(name)  # cards counted beyond the node (never, by the reference)
                    continue
                if ref is name or (entry is not None and entry.source == ref.source):
                    free = free_desc.get(name)
                    if free is not None and len(free) >= count and free[count - 1] >= share:
                        outcome.fits.append(name)
                        continue
                    known = misfits.get(name)
                    if known is not None and key in known:
                        bad = known[key]
                    else:
                        bad = self._node_misfit(name, request, entry)
                        if entry is not None:
                            misfits.setdefault(name, {})[key] = bad
                else:
                    bad = self._node_misfit(name, request, self._object_node(ref))
                if bad is None:
                    outcome.fits.append(name)
                elif bad.unresolvable:
                    outcome.unresolvable[name] = bad.reason
                else:
                    outcome.failed[name] = bad.reason
        return outcome

    def prioritize(self, pod: Mapping[str, Any], names: Sequence[str]) -> list[tuple[str, int]]:
        try:
            request = self._share_request(pod)
        except ShareRequestError:
            return [(n, 0) for n in names]
        with self._lock:
            result = []
            for name in names:
                entry = self._nodes.get(name)
                cards = entry.cards if entry and not entry.error else ()
                result.append(
                    (
                        name,
                        selection.score(
                            cards, self._used.get(name, {}), request.count, request.per_card_gib, self.policy
                        ),
                    )
                )
            return result

    # ---- binding -------------------------------------------------------------
    def assume(self, pod: Mapping[str, Any], node: str) -> Allocation:
        """Pick cards on ``node`` for ``pod`` and reserve them (before any API call)."""
        request = self._share_request(pod)  # ShareRequestError is a ValueError; caller reports it
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        with self._lock:
            if (pod.get("spec") or {}).get("nodeName"):
                raise BindError(
                    f"gpushare: pod {meta.get('namespace')}/{meta.get('name')} is already "
                    f"bound to {pod['spec']['nodeName']}"
                )
            self._release(uid)  # an earlier failed attempt of the same pod
            count = request.count
            taken = (
                self.flavor.cards_to_take(self._nodes[node].cards, self._used.get(node, {}), request)
                if node in self._nodes
                else None
            )
            if taken is not None:
                count = taken
            else:
                bad = self._node_misfit(node, request, self._nodes.get(node))
                if bad is not None:
                    raise BindError(bad.reason)
            cards = self._nodes[node].cards
            chosen = selection.select_cards(cards, self._used.get(node, {}), count, request.per_card_gib, self.policy)
            if chosen is None:  # misfit() said it fits; guard the invariant anyway
                raise BindError(f"gpushare: no {request.count} cards with {request.per_card_gib} GiB free on {node}")
            containers = {c.index: {i: request.container_per_card(c) for i in chosen} for c in request.containers}
            containers = self.flavor.split(containers)
            alloc = Allocation(
                uid=uid,
                namespace=str(meta.get("namespace", "")),
                name=str(meta.get("name", "")),
                node=node,
                containers=containers,
                assume_time_ns=self._clock(),
            )
            if not self.flavor.reserves_assumed:
                return alloc  # no reservation: the view changes when the informer sees the bind
            self._hold(alloc)
            return alloc

    def cards(self, node: str) -> tuple[Card, ...]:
        """The node's cards as the extender knows them (empty when unknown)."""
        with self._lock:
            return self._cards_of(node) or ()

    def forget(self, uid: str) -> None:
        """Drop a reservation whose bind failed."""
        with self._lock:
            self._release(uid)

    # ---- inspect -------------------------------------------------------------
    def inspect(self, node: str | None = None) -> dict[str, Any]:
        """Per-node, per-card allocation in the open gpushare extender's format."""
        with self._lock:
            names = [node] if node is not None else sorted(self._nodes)
            by_node: dict[str, list[Allocation]] = {}
            for alloc in self._allocs.values():
                by_node.setdefault(alloc.node, []).append(alloc)
            result = []
            for name in names:
                entry = self._nodes.get(name)
                if entry is None:
                    raise KeyError(name)
                devs = []
                for card in entry.cards:
                    pods = [
                        {"name": a.name, "namespace": a.namespace, "usedGPU": a.per_card[card.index]}
                        for a in sorted(by_node.get(name, []), key=lambda a: (a.namespace, a.name))
                        if card.index in a.per_card
                    ]
                    devs.append(
                        {
                            "id": card.index,
                            "totalGPU": card.total_gib,
                            "usedGPU": sum(p["usedGPU"] for p in pods),
                            "healthy": card.healthy,
                            "pods": pods,
                        }
                    )
                item: dict[str, Any] = {
                    "name": name,
                    "totalGPU": sum(d["totalGPU"] for d in devs),
                    "usedGPU": sum(d["usedGPU"] for d in devs),
                    "devs": devs,
                }
                if entry.error:
                    item["error"] = entry.error
                result.append(item)
            return {"nodes": result}
