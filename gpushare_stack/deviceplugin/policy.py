"""The device plugin's policy: every question where a variant of the stack could answer
differently, with this project's answers (docs/design.md).

The device plugin asks the policy what it advertises, what it publishes on its node
and what a container gets. Variants that exist only to test the suite (the test
doubles in ``gpushare_doubles``: the peers' flavors and the deliberate faults) subclass
``ReferenceDevicePlugin``; the stack never imports them (``gpushare_stack/variants.py``).
"""

from __future__ import annotations

import logging
from typing import Any

from gpushare_stack import contract

log = logging.getLogger(__name__)

MEM_SOCKET = "gpushare-mem.sock"
COUNT_SOCKET = "gpushare-count.sock"


class ReferenceDevicePlugin:
    """What the device plugin advertises, publishes on its node, and gives a container."""

    name = contract.REFERENCE_FLAVOR
    # Whether the plugin re-reads NVML and stops advertising a card that is gone, or
    # that the driver reported a critical Xid error for.
    watches_health = True

    def critical_xid(self, xid: int) -> bool:
        """Whether an Xid error means the card itself is sick (not one application's
        bad work), so that it leaves what the node advertises until the plugin restarts."""
        from gpushare_stack.deviceplugin.xids import APPLICATION_XIDS

        return xid not in APPLICATION_XIDS

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

    def base_environment(self, plugin: Any, match: Any) -> tuple[dict[str, str], list[Any]]:
        """The container's cards, limits and shim, before any file is written."""
        from gpushare_stack.deviceplugin.environment import container_environment

        card = next(c for c in plugin.cards if c.index == match.cards[0])
        return container_environment(
            match.cards,
            match.shares_gib or match.per_card_gib,
            match.pod_total_gib,
            card_gib=card.memory_gib,
            native_host_dir=plugin.native_host_dir,
        )

    def shim_environment(self, env: dict[str, str]) -> dict[str, str]:
        """The env that loads the isolation shim (a fault swaps in the shim's fault build)."""
        return env

    def accounting_files(self, files: list[Any], containers_dir: str) -> list[Any]:
        """The container's own files, its accounting file among them (one per container)."""
        return files

    def container_environment(self, plugin: Any, match: Any) -> tuple[dict[str, str], list[Any]]:
        """Env and mounts of the matched container, its limits and accounting files written."""
        from gpushare_stack.deviceplugin.container_files import collect_garbage, write_container_files

        env, mounts = self.base_environment(plugin, match)
        env = self.shim_environment(env)
        if plugin.containers_dir is None:  # no node directory (unit tests): the env alone
            return env, mounts
        env[contract.ENV_USAGE_FILE] = contract.CONTAINER_USAGE_FILE
        try:
            collect_garbage(plugin.containers_dir, plugin.kube.pod_uids(plugin.node) if plugin.kube else [])
        except Exception as exc:  # clean-up is best effort; the container's files are what matter
            log.warning("could not clean old container files: %s", exc)
        files = write_container_files(plugin.containers_dir, match.uid, match.container_index, env)
        files = self.accounting_files(files, plugin.containers_dir)
        return env, [*mounts, *files]
