"""The device plugin: its resources, health polling and Xid events, kubelet restarts, Allocate.

What it advertises, what it writes on its node and what a container gets come from
its policy (deviceplugin/policy.py): the reference stack's two resources by default.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any, Protocol

import grpc

from gpushare_stack import contract
from gpushare_stack.api import api_pb2
from gpushare_stack.deviceplugin import devices
from gpushare_stack.deviceplugin.container_files import ContainerFilesError
from gpushare_stack.deviceplugin.discovery import DiscoveryError, GpuCard
from gpushare_stack.deviceplugin.environment import (
    DEVICE_LIST_STRATEGIES,
    ENVVAR,
    VOLUME_MOUNTS,
    HostMount,
    device_list_mounts,
)
from gpushare_stack.deviceplugin.grpc_server import ResourcePlugin, register
from gpushare_stack.deviceplugin.matching import AllocationMatchError, Match, match_allocation
from gpushare_stack.deviceplugin.policy import COUNT_SOCKET, MEM_SOCKET, ReferenceDevicePlugin
from gpushare_stack.deviceplugin.xids import XidWatcher

log = logging.getLogger(__name__)

__all__ = ["COUNT_SOCKET", "MEM_SOCKET", "DevicePlugin", "PodSource", "container_response"]


class PodSource(Protocol):
    """What Allocate needs from the API server (``kube.KubeAccess`` in production)."""

    def pending_pods(self, node: str) -> list[dict[str, Any]]: ...
    def mark_assigned(self, namespace: str, name: str) -> None: ...
    def annotate_node(self, node: str, key: str, value: str) -> None: ...

    # Used only by the peers' flavors (gpushare_doubles/flavors):
    # patch_pod_annotations(namespace, name, annotations) and
    # patch_node_capacity(node, capacity); mark_assigned(namespace, name, annotations).


def container_response(env: dict[str, str], mounts: list[HostMount]) -> api_pb2.ContainerAllocateResponse:
    """One container's answer to Allocate: its env and its (host) mounts."""
    return api_pb2.ContainerAllocateResponse(
        envs=env,
        mounts=[
            api_pb2.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only) for m in mounts
        ],
    )


def _socket_identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_ctime_ns


class DevicePlugin:
    """Advertises the flavor's resources (reference: ``aliyun.com/gpu-mem`` GiB devices
    and ``aliyun.com/gpu-count`` cards)."""

    def __init__(
        self,
        node: str,
        discover: Callable[[], list[GpuCard]],
        kube: PodSource | None,
        socket_dir: str = contract.DEVICE_PLUGIN_DIR,
        native_host_dir: str = contract.HOST_NATIVE_DIR,
        containers_dir: str | None = None,
        health_interval_s: float = 10.0,
        kubelet_check_s: float = 1.0,
        flavor: ReferenceDevicePlugin | None = None,
        device_list_strategy: str = ENVVAR,
    ) -> None:
        if device_list_strategy not in DEVICE_LIST_STRATEGIES:
            raise ValueError(
                f"gpushare: --device-list-strategy must be one of {DEVICE_LIST_STRATEGIES}, got {device_list_strategy!r}"
            )
        self.device_list_strategy = device_list_strategy
        self.node = node
        self._discover = discover
        self.kube = kube
        self.socket_dir = socket_dir
        self.kubelet_socket = os.path.join(socket_dir, contract.KUBELET_SOCKET_NAME)
        self.native_host_dir = native_host_dir
        # Where each container's limits and preload files are written (None: env only).
        self.containers_dir = containers_dir
        self.health_interval_s = health_interval_s
        self.kubelet_check_s = kubelet_check_s
        self.cards: list[GpuCard] = discover()
        if not self.cards:
            raise DiscoveryError(f"gpushare: NVML reports no cards on node {node}")
        self.healthy: dict[str, bool] = {c.uuid: True for c in self.cards}
        # Cards the driver reported a critical Xid for (UUID -> Xid): sick until restart.
        self.xid_sick: dict[str, int] = {}
        self._xid_news = threading.Event()
        self._xid_watcher: XidWatcher | None = None
        self.alloc_lock = threading.Lock()
        self._progress: dict[str, set[int]] = {}
        self._stop = threading.Event()
        self.registrations = 0
        self.flavor = flavor if flavor is not None else ReferenceDevicePlugin()
        self.resources: list[ResourcePlugin] = self.flavor.resources(self)
        by_name = {r.resource: r for r in self.resources}
        self.mem = by_name.get(contract.RESOURCE_MEM)
        self.count = by_name.get(contract.RESOURCE_COUNT)

    # ---- health -------------------------------------------------------------
    def on_xid(self, uuid: str, xid: int) -> None:
        """An Xid event (from the watcher's thread): a critical one makes the card sick
        at the next health poll, which comes at once."""
        if not self.flavor.critical_xid(xid):
            log.info("card %s: Xid %d, an application error; the card stays", uuid, xid)
            return
        log.warning("card %s: critical Xid %d; it leaves what the node advertises until restart", uuid, xid)
        self.xid_sick.setdefault(uuid, xid)
        self._xid_news.set()

    def watch_xids(self) -> XidWatcher | None:
        """Start watching the cards' Xid errors (NVML events) where the flavor watches health."""
        if not self.flavor.watches_health:
            return None
        watcher = XidWatcher([c.uuid for c in self.cards], self.on_xid)
        watcher.start()
        self._xid_watcher = watcher
        return watcher

    def _join_new_cards(self, found: list[GpuCard]) -> None:
        """Cards NVML reports that this plugin has not seen (lost when it started, then
        back) join what it advertises, their Xids watched too."""
        known = {c.uuid for c in self.cards}
        new = [c for c in found if c.uuid not in known]
        if not new:
            return
        for card in new:
            log.warning("card %d (%s) is reachable now; it joins what the node advertises", card.index, card.uuid)
        self.cards = sorted([*self.cards, *new], key=lambda c: c.index)
        if self._xid_watcher is not None:
            self._xid_watcher.stop.set()
            self.watch_xids()

    def poll_health(self) -> bool:
        """Re-read NVML; a card that is gone (or NVML failing), or that had a critical
        Xid, turns Unhealthy; a card it did not know (lost at start, then back) joins.
        Returns whether anything changed."""
        if not self.flavor.watches_health:
            return False
        try:
            found = self._discover()
        except DiscoveryError as exc:
            log.error("%s; marking every card Unhealthy", exc)
            found = []
        self._join_new_cards(found)  # a card that joins is a key self.healthy lacks: a change
        present = {c.uuid for c in found}
        new = {c.uuid: c.uuid in present and c.uuid not in self.xid_sick for c in self.cards}
        if new == self.healthy:
            return False
        for uuid, ok in new.items():
            if ok != self.healthy.get(uuid):
                log.warning("card %s is now %s", uuid, contract.HEALTHY if ok else contract.UNHEALTHY)
        self.healthy = new
        for plugin in self.resources:
            plugin.devices_changed()
        self.publish_cards()
        return True

    def publish_cards(self) -> None:
        if self.kube is None:
            return
        try:
            for key, value in self.flavor.node_annotations(self.cards, self.healthy).items():
                self.kube.annotate_node(self.node, key, value)
            capacity = self.flavor.node_capacity(self.cards, self.healthy)
            if capacity:
                self.kube.patch_node_capacity(self.node, capacity)
        except Exception as exc:  # the next change retries; Allocate does not depend on it
            log.error("cannot annotate node %s: %s", self.node, exc)

    # ---- Allocate -----------------------------------------------------------
    def _check_ids(self, ids: list[str], context: grpc.ServicerContext, parse: Callable[[str], str]) -> None:
        known = {c.uuid for c in self.cards}
        for device_id in ids:
            try:
                uuid = parse(device_id)
            except ValueError as exc:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            if uuid not in known:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"gpushare: device ID {device_id!r} names no card of node {self.node}",
                )

    def allocation_environment(self, match: Match) -> tuple[dict[str, str], list[HostMount]]:
        """Env and mounts for the matched container: its cards and per-card limits, and
        with the volume-mounts strategy its cards as device mounts too."""
        env, mounts = self.flavor.container_environment(self, match)
        if self.device_list_strategy == VOLUME_MOUNTS:
            mounts = [*mounts, *device_list_mounts(env.get(contract.ENV_VISIBLE, ""))]
        return env, mounts

    def allocate_mem(self, request: api_pb2.AllocateRequest, context: grpc.ServicerContext) -> api_pb2.AllocateResponse:
        responses = []
        for creq in request.container_requests:
            ids = list(creq.devices_ids)
            self._check_ids(ids, context, devices.card_uuid)
            if self.kube is None:
                context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "gpushare: the device plugin has no API client, so it cannot find the pod",
                )
            try:
                with self.alloc_lock:
                    match = match_allocation(self.kube.pending_pods(self.node), self.node, len(ids), self._progress)
                    by_index = {c.index: c for c in self.cards}
                    missing = [i for i in match.cards if i not in by_index]
                    if missing:
                        raise AllocationMatchError(
                            f"gpushare: pod {match.namespace}/{match.name} was given cards {missing} "
                            f"that node {self.node} does not have"
                        )
                    if match.pod_done:
                        if self.flavor.assigned_annotations is None:
                            self.kube.mark_assigned(match.namespace, match.name)
                        else:
                            self.kube.mark_assigned(match.namespace, match.name, self.flavor.assigned_annotations)
                        self._progress.pop(match.uid, None)
                    else:
                        self._progress.setdefault(match.uid, set()).add(match.container_index)
            except AllocationMatchError as exc:
                log.error("%s", exc)
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
            except Exception as exc:  # API server errors
                log.error("Allocate: %s", exc)
                context.abort(grpc.StatusCode.UNAVAILABLE, f"gpushare: Allocate failed: {exc}")
            try:
                env, mounts = self.allocation_environment(match)
            except ContainerFilesError as exc:
                log.error("%s", exc)
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
            log.info(
                "Allocate %s/%s container %s: cards %s, GiB per card %s",
                match.namespace,
                match.name,
                match.container_name,
                match.cards,
                list(match.shares_gib or (match.per_card_gib,)),
            )
            responses.append(container_response(env, mounts))
        return api_pb2.AllocateResponse(container_responses=responses)

    def allocate_count(
        self, request: api_pb2.AllocateRequest, context: grpc.ServicerContext
    ) -> api_pb2.AllocateResponse:
        """gpu-count devices carry nothing: env and mounts come with the gpu-mem Allocate."""
        for creq in request.container_requests:
            self._check_ids(list(creq.devices_ids), context, lambda i: i)
        return api_pb2.AllocateResponse(
            container_responses=[api_pb2.ContainerAllocateResponse() for _ in request.container_requests]
        )

    # ---- lifecycle ----------------------------------------------------------
    def start(self) -> None:
        """Serve the resources' sockets and register them with the kubelet."""
        for plugin in self.resources:
            plugin.serve(self.socket_dir)
        for plugin in self.resources:
            register(self.kubelet_socket, plugin, line=self.flavor.registered_line)
        self.registrations += 1
        self.publish_cards()

    def stop(self) -> None:
        self._stop.set()
        for plugin in self.resources:
            plugin.stop()

    def run(self) -> None:
        """Serve until stopped: poll health, and (re)start + register whenever the
        kubelet's socket appears or is recreated (a restarted kubelet wipes our sockets)."""
        registered: tuple[int, int] | None = None
        since_health = 0.0
        self.watch_xids()
        while not self._stop.is_set():
            now = _socket_identity(self.kubelet_socket)
            if now is not None and now != registered:
                if registered is not None:
                    log.warning("%s was recreated (kubelet restart); registering again", self.kubelet_socket)
                for plugin in self.resources:
                    plugin.stop()
                try:
                    self.start()
                    registered = now
                except grpc.RpcError as exc:
                    log.error("registration with %s failed: %s; retrying", self.kubelet_socket, exc)
            if since_health >= self.health_interval_s or self._xid_news.is_set():
                since_health = 0.0
                self._xid_news.clear()
                self.poll_health()
            self._stop.wait(self.kubelet_check_s)
            since_health += self.kubelet_check_s
        if self._xid_watcher is not None:
            self._xid_watcher.stop.set()
