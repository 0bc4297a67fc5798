"""Flavor ``gpushare-like``: behaves like the open-source Alibaba gpushare
(AliyunContainerService/gpushare-scheduler-extender and gpushare-device-plugin).

- A pod asks ``aliyun.com/gpu-mem: N`` GiB and gets them on ONE card; the
  ``aliyun.com/gpu-count`` label means nothing to it (no multi-card sharing).
- The extender knows a node's cards from its capacity only: ``aliyun.com/gpu-mem``
  over ``aliyun.com/gpu-count`` equal cards; it binpacks; a node without a card
  holding N free fails with gpushare's "Insufficient GPU Memory in one device".
- Bind writes only the open annotations: ``ALIYUN_COM_GPU_MEM_IDX`` (one index),
  ``..._POD``, ``..._ASSUME_TIME``, ``..._ASSIGNED=false``.
- The device plugin advertises ``aliyun.com/gpu-mem`` (one device per GiB), patches
  the node's capacity ``aliyun.com/gpu-count`` itself, writes no card annotation, and
  gives a container the card and the ``ALIYUN_COM_GPU_MEM_*`` variables only: no
  isolation library, no limits, no mounts (nvidia-smi shows the physical card).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpushare_doubles.flavors import GPUSHARE_LIKE
from gpushare_stack import contract
from gpushare_stack.allocation import Allocation
from gpushare_stack.deviceplugin.policy import ReferenceDevicePlugin
from gpushare_stack.extender.nodes import MISSING, NodeSource, card_source
from gpushare_stack.extender.policy import ReferenceExtender
from gpushare_stack.extender.selection import Card, Misfit
from gpushare_stack.request import ContainerShare, ShareRequest, ShareRequestError, container_gib

# The open extender's filter reasons (pkg/scheduler/gpushare-predicate.go).
INSUFFICIENT = "Insufficient GPU Memory in one device"
NOT_FOR_SHARE = "The node {node} is not for GPU share, need skip"


class GpushareLikeExtender(ReferenceExtender):
    name = GPUSHARE_LIKE
    description = (
        "kube-scheduler extender behaving like the open-source gpushare: aliyun.com/gpu-mem=N "
        "GiB on one card (the aliyun.com/gpu-count label is ignored), binpack, open "
        "ALIYUN_COM_GPU_MEM_* annotations only."
    )
    fast_node_view = False  # cards come from capacity only, never from the reference annotation

    def serving_line(self, address: str, port: int, prefix: str, how: str, policy: str) -> str:
        return f"server starting on the port :{port}"  # the open extender's words (cmd/main.go)

    def lock_node(self, core: Any, pod: Mapping[str, Any], node: str) -> None:
        """The open extender binds at once, whatever else waits for an Allocate on the
        node: its device plugin then serves pods created together by bind order."""

    def bind_finished(self, node: str) -> None:
        """Nothing was held."""

    def share_request(self, pod: Mapping[str, Any]) -> ShareRequest:
        shares = []
        for index, container in enumerate((pod.get("spec") or {}).get("containers") or []):
            gib = container_gib(container)
            if gib > 0:
                shares.append(ContainerShare(index=index, name=str(container.get("name", "")), gib=gib))
        if not shares:
            raise ShareRequestError(f"gpushare: pod requests no {contract.RESOURCE_MEM}")
        return ShareRequest(count=1, total_gib=sum(s.gib for s in shares), containers=tuple(shares))

    def node_source(self, node: Mapping[str, Any]) -> NodeSource:
        meta = node.get("metadata") or {}
        capacity = (node.get("status") or {}).get("capacity") or {}
        return NodeSource(
            str(meta.get("name", "")),
            card_source(
                None,
                capacity.get(contract.RESOURCE_MEM, MISSING),
                capacity.get(contract.RESOURCE_COUNT, MISSING),
            ),
        )

    def misfit(
        self, node: str, cards: Sequence[Card], used: Mapping[int, int], count: int, per_card: int
    ) -> Misfit | None:
        # gpushare answers every misfit in FailedNodes (it has no "unresolvable").
        if not cards:
            return Misfit(NOT_FOR_SHARE.format(node=node), False)
        biggest = max(c.total_gib for c in cards)
        if biggest < per_card:
            return Misfit(
                f"{INSUFFICIENT}: {contract.RESOURCE_MEM}={per_card} is more than the memory of any device "
                f"of node {node} ({biggest} GiB)",
                False,
            )
        if not any(c.healthy and c.total_gib - used.get(c.index, 0) >= per_card for c in cards):
            return Misfit(f"{INSUFFICIENT}: no device of node {node} has {per_card} GiB free", False)
        return None

    def bind_annotations(self, alloc: Allocation, cards: Sequence[Card], pod: Mapping[str, Any]) -> dict[str, str]:
        return {
            contract.ANN_IDX: ",".join(str(i) for i in alloc.cards),
            contract.ANN_POD: str(alloc.total_gib),
            contract.ANN_ASSUME_TIME: str(alloc.assume_time_ns),
            contract.ANN_ASSIGNED: "false",
        }


class GpushareLikeDevicePlugin(ReferenceDevicePlugin):
    name = GPUSHARE_LIKE
    description = (
        "Kubelet device plugin behaving like the open-source gpushare: advertises aliyun.com/gpu-mem "
        "(one device per GiB per card), patches the node capacity aliyun.com/gpu-count, and gives a "
        "container its card and the ALIYUN_COM_GPU_MEM_* variables, without isolation."
    )
    assigned_annotations = {contract.ANN_ASSIGNED: "true"}
    # The open device plugin, run by hand with card 0 lost for 70 s, kept advertising
    # every card, and a pod was placed on the lost one.
    watches_health = False

    def registered_line(self, resource: str, endpoint: str, kubelet_socket: str) -> str:
        return "Registered device plugin with Kubelet"  # the open device plugin's words

    def resources(self, plugin: Any) -> list[Any]:
        return [r for r in super().resources(plugin) if r.resource == contract.RESOURCE_MEM]

    def node_annotations(self, cards: list[Any], healthy: dict[str, bool]) -> dict[str, str]:
        return {}

    def node_capacity(self, cards: list[Any], healthy: dict[str, bool]) -> dict[str, str]:
        return {contract.RESOURCE_COUNT: str(len(cards))}

    def container_environment(self, plugin: Any, match: Any) -> tuple[dict[str, str], list[Any]]:
        card = next(c for c in plugin.cards if c.index == match.cards[0])
        indices = ",".join(str(i) for i in match.cards)
        env = {
            contract.ENV_VISIBLE: indices,
            contract.ENV_IDX: indices,
            contract.ENV_POD: str(match.pod_total_gib),
            contract.ENV_CONTAINER: str((match.shares_gib or (match.per_card_gib,))[0]),
            contract.ENV_DEV: str(card.memory_gib),
        }
        return env, []
