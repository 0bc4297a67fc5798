"""The reference flavor: this project's stack (docs/design.md), as strategy objects.

The peers' flavors (``gpushare_like.py``, ``hami_like.py``) subclass these and
override only where the stack they behave like differs.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpushare_stack import allocation, contract, faults, request
from gpushare_stack.allocation import Allocation
from gpushare_stack.extender import nodes, selection
from gpushare_stack.extender.nodes import CardSource, NodeSource
from gpushare_stack.extender.selection import Card, Misfit
from gpushare_stack.peers import REFERENCE
from gpushare_stack.request import ShareRequest

log = logging.getLogger(__name__)

CardsOf = Callable[[str], "tuple[Card, ...] | None"]


class NodeNotKnown(LookupError):
    """A pod's allocation names cards by a node's card list the extender has not read yet."""


class ReferenceExtender:
    """How the extender reads requests and nodes, judges fits and writes a bind."""

    name = REFERENCE
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
        from gpushare_stack.extender.state import BindError
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


class ReferenceDevicePlugin:
    """What the device plugin advertises, publishes on its node, and gives a container."""

    name = REFERENCE
    # Whether the plugin re-reads NVML and stops advertising a card that is gone.
    watches_health = True

    def registered_line(self, resource: str, endpoint: str, kubelet_socket: str) -> str:
        """What the plugin logs once the kubelet took its registration."""
        return f"registered {resource} (endpoint {endpoint}) with {kubelet_socket}"

    description = (
        "Kubelet device plugin advertising aliyun.com/gpu-mem (one device per GiB per card) and "
        "aliyun.com/gpu-count (one per card); Allocate gives a container the cards and per-card "
        "limits the gpushare extender chose."
    )
    # The annotations Allocate writes once a pod is done; None: the plugin's default
    # (ALIYUN_COM_GPU_MEM_ASSIGNED and ACK's scheduler.framework.gpushare.assigned).
    assigned_annotations: dict[str, str] | None = None

    def resources(self, plugin: Any) -> list[Any]:
        from gpushare_stack.deviceplugin import devices
        from gpushare_stack.deviceplugin.grpc_server import ResourcePlugin
        from gpushare_stack.deviceplugin.plugin import COUNT_SOCKET, MEM_SOCKET

        return [
            ResourcePlugin(
                contract.RESOURCE_MEM,
                MEM_SOCKET,
                lambda: devices.mem_devices(plugin.cards, plugin.healthy),
                plugin.allocate_mem,
            ),
            ResourcePlugin(
                contract.RESOURCE_COUNT,
                COUNT_SOCKET,
                lambda: devices.count_devices(plugin.cards, plugin.healthy),
                plugin.allocate_count,
            ),
        ]

    def node_annotations(self, cards: list[Any], healthy: dict[str, bool]) -> dict[str, str]:
        from gpushare_stack.deviceplugin.discovery import node_cards_annotation

        return {contract.NODE_CARDS_ANNOTATION: node_cards_annotation(cards, healthy)}

    def node_capacity(self, cards: list[Any], healthy: dict[str, bool]) -> dict[str, str]:
        """Extended resources the plugin patches into node status itself (none here)."""
        return {}

    def container_environment(self, plugin: Any, match: Any) -> tuple[dict[str, str], list[Any]]:
        from gpushare_stack.deviceplugin.container_files import collect_garbage, write_container_files
        from gpushare_stack.deviceplugin.environment import container_environment

        card = next(c for c in plugin.cards if c.index == match.cards[0])
        env, mounts = container_environment(
            match.cards,
            match.shares_gib or match.per_card_gib,
            match.pod_total_gib,
            card_gib=card.memory_gib,
            native_host_dir=plugin.native_host_dir,
        )
        if plugin.fault == faults.NO_ISOLATION:
            return faults.without_isolation(env), mounts
        if plugin.fault in faults.SHIM_FAULTS:
            env = faults.with_shim_fault(env, plugin.fault)
        if plugin.containers_dir is None:  # no node directory (unit tests): the env alone
            return env, mounts
        env[contract.ENV_USAGE_FILE] = contract.CONTAINER_USAGE_FILE
        try:
            collect_garbage(plugin.containers_dir, plugin.kube.pod_uids(plugin.node) if plugin.kube else [])
        except Exception as exc:  # clean-up is best effort; the container's files are what matter
            log.warning("could not clean old container files: %s", exc)
        files = write_container_files(plugin.containers_dir, match.uid, match.container_index, env)
        if plugin.fault == faults.SHARED_ACCOUNTING:
            files = faults.shared_accounting(files, plugin.containers_dir)
        return env, [*mounts, *files]
