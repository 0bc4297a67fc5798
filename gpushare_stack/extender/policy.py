"""The extender's policy: every question where a variant of the stack could answer
differently, with this project's answers (docs/design.md).

The extender's state, binder and server ask the policy object and nothing else where
stacks differ: how a pod asks, how a node's cards read, why a node misfits, what a bind
writes, and how binds on one node are ordered. Variants of the stack that exist only
to test the suite (the test doubles in ``gpushare_doubles``: the peers' flavors and the
deliberate faults) subclass ``ReferenceExtender`` and override these methods; the
stack itself never imports them (``gpushare_stack/variants.py`` loads them by name).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpushare_stack import allocation, contract, request
from gpushare_stack.allocation import Allocation, is_terminated
from gpushare_stack.extender import nodes, selection
from gpushare_stack.extender.errors import BindError
from gpushare_stack.extender.nodes import CardSource, NodeSource
from gpushare_stack.extender.selection import Card, Misfit
from gpushare_stack.request import ShareRequest

log = logging.getLogger(__name__)

CardsOf = Callable[[str], "tuple[Card, ...] | None"]


class ReferenceExtender:
    """How the extender reads requests and nodes, judges fits and writes a bind."""

    name = contract.REFERENCE_FLAVOR
    description = (
        "kube-scheduler extender that places pods asking aliyun.com/gpu-mem=N with label "
        "aliyun.com/gpu-count=M on M cards of one node, N/M GiB each."
    )
    unit = "GiB"  # of Card.total_gib and the allocation figures
    default_prefix = contract.EXTENDER_PREFIX

    def serving_line(self, address: str, port: int, prefix: str, how: str, policy: str) -> str:
        """What the extender logs once it listens (each flavor as its stack words it)."""
        return f"serving on {address}:{port}{prefix} ({how}, policy {policy}, flavor {self.name})"

    def started(self, api: Any) -> None:
        """Called once the extender listens (a flavor may announce itself in the cluster)."""

    # Whether the server may read node objects with its fast msgspec view (the card
    # annotation and capacity of this flavor); other flavors get their node_source.
    fast_node_view = True
    serves_inspect = True  # GET {prefix}/inspect, to trusted clients

    def is_share_pod(self, pod: Mapping[str, Any]) -> bool:
        return request.is_share_pod(pod)

    def share_request(self, pod: Mapping[str, Any]) -> ShareRequest:
        return request.share_request(pod)

    def node_source(self, node: Mapping[str, Any]) -> NodeSource:
        return nodes.node_source(node)

    def cards_from_source(self, name: str, source: CardSource) -> tuple[Card, ...]:
        return nodes.cards_from_source(name, source)

    def misfit(
        self, node: str, cards: Sequence[Card], used: Mapping[int, int], count: int, per_card: int
    ) -> Misfit | None:
        return selection.misfit(node, cards, used, count, per_card)

    def bind_annotations(self, alloc: Allocation, cards: Sequence[Card], pod: Mapping[str, Any]) -> dict[str, str]:
        return allocation.bind_annotations(alloc)

    def allocation_from_pod(self, pod: Mapping[str, Any], cards_of: CardsOf) -> Allocation | None:
        return allocation.allocation_from_pod(pod)

    def lock_node(self, core: Any, pod: Mapping[str, Any], node: str) -> None:
        """Before a bind: hold the node's binds in this process, and refuse the bind while
        a pod the device plugin could confuse with this one waits for its Allocate there
        (``extender/twins.py``). ``bind_finished`` lets the next bind in."""
        from gpushare_stack.extender.twins import NodeBinds, waiting_twins

        binds = self.__dict__.setdefault("_node_binds", NodeBinds())
        binds.acquire(node)
        try:
            listed = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}", _preload_content=False)
            twins = waiting_twins(json.loads(listed.data).get("items") or [], pod, time.time())
        except BaseException:
            binds.release(node)
            raise
        if twins:
            binds.release(node)
            meta = pod.get("metadata") or {}
            raise BindError(
                f"gpushare: on node {node}, {', '.join(twins)} with the same {contract.RESOURCE_MEM} per container "
                f"still wait(s) for the device plugin, which could not tell them from "
                f"{meta.get('namespace')}/{meta.get('name')}; it is bound after them"
            )

    def bind_finished(self, node: str) -> None:
        """After a bind, whatever its outcome: let the node's next bind in."""
        binds = self.__dict__.get("_node_binds")
        if binds is not None:
            binds.release(node)

    def unlock_node(self, core: Any, pod: Mapping[str, Any], node: str) -> None:
        """After a failed bind: give back what ``lock_node`` claimed beyond this process
        (nothing here; ``bind_finished`` follows)."""

    # ---- where a deliberately broken variant differs (gpushare_doubles/faults.py) --------
    # The reference answers below keep every rule; each is one seam a fault overrides.
    reserves_assumed = True  # assume() holds the chosen cards until the bind is seen

    def gives_cards_back(self, pod: Mapping[str, Any]) -> bool:
        """Whether a pod's cards are free again: once it ended (Succeeded or Failed)."""
        return is_terminated(pod)

    def refusal_for_every_node(self, count: int, per_card: int) -> str | None:
        """A reason that turns a share pod away from every node before any is judged
        (None: judge each node)."""
        return None

    def cards_free_anywhere(self, free_desc: Mapping[str, list[int]], per_card: int) -> int:
        """Cards with ``per_card`` free that a node may count beyond its own (none: the
        M cards of a pod are on one node)."""
        return 0

    def cards_to_take(self, cards: Sequence[Card], used: Mapping[int, int], req: ShareRequest) -> int | None:
        """How many cards a bind takes on a node without judging its fit (None: judge the
        fit and take the M cards the pod asks)."""
        return None

    def split(self, containers: dict[int, dict[int, int]]) -> dict[int, dict[int, int]]:
        """Each container's per-card share as the bind writes it (N/M on each card)."""
        return containers

    def before_writing_bind(self, pod: str) -> None:
        """Called between choosing a pod's cards and writing them (nothing to wait for)."""

    def before_binding(self, pod: str) -> None:
        """Called between writing a pod's cards and creating its Binding (nothing to wait for)."""

    # The informer: the cache is synced (the extender Ready and serving filter and bind)
    # only once it holds the nodes and every pod's annotations, so a restarted extender
    # never books a card a running pod holds.
    synced_needs = ("nodes", "pods")

    def before_listing(self, kind: str) -> None:
        """Called before each list of ``kind`` (``nodes`` or ``pods``; nothing to wait for)."""

    def listening(self, address: str, deadline_s: float, max_connections: int) -> tuple[str, float, int]:
        """Where the server listens, how long it waits for a client and how many it serves
        at once: as the command line says."""
        return address, deadline_s, max_connections
