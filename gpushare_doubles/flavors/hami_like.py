"""Flavor ``hami-like``: behaves like HAMi (Project-HAMi/HAMi + HAMi-core).

- A container asks ``nvidia.com/gpu: M`` cards and ``nvidia.com/gpumem: X`` MiB on each
  (limits). The device plugin registers ``nvidia.com/gpu`` with 10 virtual devices per
  card (HAMi's default ``deviceSplitCount``) and describes the cards in HAMi's node
  annotation ``hami.io/node-nvidia-register``; nobody advertises ``nvidia.com/gpumem``
  (the scheduler configuration marks it ``ignoredByScheduler``).
- The extender picks M distinct healthy cards of one node, each with X MiB free; it
  reports misfits with HAMi's reason names (``CardInsufficientMemory``,
  ``NodeInsufficientDevice``). Bind writes HAMi's pod annotations:
  ``hami.io/vgpu-devices-allocated`` = ``GPU-a,NVIDIA,4096,0:GPU-b,NVIDIA,4096,0:;``
  (cards end with ':', containers with ';'), ``hami.io/vgpu-devices-to-allocate`` (the
  same, emptied container by container by Allocate), ``hami.io/vgpu-node``,
  ``hami.io/bind-phase=allocating`` (``success`` once allocated) and ``hami.io/bind-time``.
- Allocate gives NVIDIA_VISIBLE_DEVICES (the cards' UUIDs),
  ``CUDA_DEVICE_MEMORY_LIMIT_<i>=<X>m`` and LD_PRELOAD of the hami-like isolation
  library (native ``libgpushare-shim-hamilike.so``), which charges each process's CUDA
  context to the share as HAMi-core does.
- One pod is bound per node at a time, as HAMi's scheduler does: Bind takes the node
  lock (node annotation ``hami.io/mutex.lock`` = ``<RFC 3339 time>,<namespace>,<name>``)
  and the device plugin releases it once the pod's containers are allocated. The kubelet
  calls Allocate without naming the pod, so two pods asking as many cards, bound in the
  same instant, could otherwise get each other's cards and limits.

Units: the extender's card sizes and allocation figures are MiB in this flavor.
"""

from __future__ import annotations

import calendar
import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from gpushare_doubles.flavors import HAMI_LIKE
from gpushare_stack import contract
from gpushare_stack.allocation import Allocation, AllocationAnnotationError
from gpushare_stack.deviceplugin.policy import ReferenceDevicePlugin
from gpushare_stack.extender.errors import NodeNotKnown
from gpushare_stack.extender.nodes import NodeCardsError, NodeSource, card_source
from gpushare_stack.extender.policy import CardsOf, ReferenceExtender
from gpushare_stack.extender.selection import Card, Misfit
from gpushare_stack.request import ContainerShare, ShareRequest, ShareRequestError

log = logging.getLogger(__name__)

RESOURCE_GPU = "nvidia.com/gpu"
RESOURCE_GPUMEM = "nvidia.com/gpumem"
NODE_REGISTER = "hami.io/node-nvidia-register"
NODE_HANDSHAKE = "hami.io/node-handshake"
ANN_ALLOCATED = "hami.io/vgpu-devices-allocated"
ANN_TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
ANN_NODE = "hami.io/vgpu-node"
ANN_PHASE = "hami.io/bind-phase"
ANN_BIND_TIME = "hami.io/bind-time"
NODE_LOCK = "hami.io/mutex.lock"
NODE_LOCK_TTL_S = 300  # HAMi's: a lock older than 5 minutes is stale
PHASE_ALLOCATING = "allocating"
PHASE_SUCCESS = "success"
DEVICE_TYPE = "NVIDIA"
DEVICE_SPLIT_COUNT = 10  # HAMi's default deviceSplitCount
DEVICE_CORES = 100
# HAMi's scheduler serves /filter, /bind, /webhook, /healthz at the root (cmd/scheduler).
EXTENDER_PREFIX = ""
# The label HAMi's scheduler puts on its pods; its Service selects the leader's.
ROLE_LABEL = "hami.io/scheduler-role"
SHIM_PATH = f"{contract.CONTAINER_NATIVE_DIR}/lib/libgpushare-shim-hamilike.so"
ENV_LIMIT_PREFIX = "CUDA_DEVICE_MEMORY_LIMIT_"
PLUGIN_SOCKET = "hami-like-nvidia.sock"
# HAMi's filter reasons (pkg/device/common).
CARD_INSUFFICIENT_MEMORY = "CardInsufficientMemory"
NODE_INSUFFICIENT_DEVICE = "NodeInsufficientDevice"


# ---- the request ----------------------------------------------------------------------
def _quantity(container: Mapping[str, Any], resource: str) -> int | None:
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        values = resources.get(section) or {}
        if resource in values:
            text = str(values[resource]).strip()
            if not text.isdigit():
                raise ShareRequestError(
                    f"hami-like: {resource} of container {container.get('name')!r} must be a "
                    f"non-negative integer, got {values[resource]!r}"
                )
            return int(text)
    return None


def container_request(container: Mapping[str, Any]) -> tuple[int, int]:
    """(cards, MiB per card) a container asks; (0, 0) when it asks no nvidia.com/gpu."""
    cards = _quantity(container, RESOURCE_GPU) or 0
    if cards == 0:
        return 0, 0
    mib = _quantity(container, RESOURCE_GPUMEM)
    if not mib:
        raise ShareRequestError(
            f"hami-like: container {container.get('name')!r} asks {RESOURCE_GPU}={cards} without "
            f"{RESOURCE_GPUMEM} (MiB per card); whole cards are not supported by this variant"
        )
    return cards, mib


# ---- node annotation --------------------------------------------------------------------
def register_annotation(cards: Iterable[Any], healthy: Mapping[str, bool]) -> str:
    """``hami.io/node-nvidia-register``: HAMi's JSON list, one object per card."""
    return json.dumps(
        [
            {
                "id": c.uuid,
                "index": c.index,
                "count": DEVICE_SPLIT_COUNT,
                "devmem": c.memory_mib,
                "devcore": DEVICE_CORES,
                "type": f"{DEVICE_TYPE}-{c.name}",
                "numa": 0,
                "mode": "hami-core",
                "health": bool(healthy.get(c.uuid, True)),
            }
            for c in cards
        ],
        separators=(",", ":"),
    )


def cards_from_register(name: str, raw: str) -> tuple[Card, ...]:
    """Cards of a ``hami.io/node-nvidia-register`` value: HAMi's JSON list, or its legacy
    ``uuid,count,devmem,devcore,type,numa,health:`` form (index = position)."""
    where = f"annotation {NODE_REGISTER} of node {name or '?'}"
    text = raw.strip()
    cards = []
    try:
        if text.startswith("["):
            for pos, entry in enumerate(json.loads(text)):
                cards.append(
                    Card(
                        int(entry.get("index", pos)),
                        int(entry["devmem"]),
                        bool(entry.get("health", True)),
                        uuid=str(entry["id"]),
                    )
                )
        else:
            for pos, entry in enumerate(e for e in text.split(":") if e.strip()):
                fields = entry.split(",")
                cards.append(Card(pos, int(fields[2]), fields[6].strip().lower() == "true", uuid=fields[0].strip()))
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise NodeCardsError(f"hami-like: {where} is malformed ({exc!r}): {raw!r}") from None
    if len({c.index for c in cards}) != len(cards):
        raise NodeCardsError(f"hami-like: {where} lists a card index twice: {raw!r}")
    return tuple(sorted(cards, key=lambda c: c.index))


# ---- pod annotations --------------------------------------------------------------------
def encode_devices(containers: Sequence[Sequence[tuple[str, int]]]) -> str:
    """HAMi's pod device list: per container ``uuid,NVIDIA,MiB,cores:`` per card, then ';'."""
    return "".join("".join(f"{uuid},{DEVICE_TYPE},{mib},0:" for uuid, mib in devs) + ";" for devs in containers)


def decode_devices(text: str) -> list[list[tuple[str, int]]]:
    """The inverse of ``encode_devices``: per container, (uuid, MiB) per card."""
    parts = text.split(";")
    if parts and parts[-1].strip() == "":
        parts = parts[:-1]
    containers = []
    for part in parts:
        devs = []
        for dev in part.split(":"):
            if not dev.strip():
                continue
            fields = dev.split(",")
            if len(fields) < 3 or not fields[2].strip().isdigit():
                raise AllocationAnnotationError(f"hami-like: device {dev!r} is not uuid,type,MiB,cores")
            devs.append((fields[0].strip(), int(fields[2])))
        containers.append(devs)
    return containers


# ---- node lock ----------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeLock:
    """Who holds a node's ``hami.io/mutex.lock``, and since when (epoch seconds)."""

    since: float
    namespace: str
    name: str


def lock_value(namespace: str, name: str, now: float) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    return f"{stamp},{namespace},{name}"


def parse_lock(value: str) -> NodeLock | None:
    """The lock's holder; None for a value in no form HAMi writes (taken as stale)."""
    stamp, _, rest = value.partition(",")
    namespace, _, name = rest.partition(",")
    try:
        since = calendar.timegm(time.strptime(stamp.strip(), "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return None
    return NodeLock(float(since), namespace, name)


def _read_json(call: Any, *args: Any) -> dict[str, Any] | None:
    """One API read as a dict; None when the object does not exist."""
    from kubernetes.client.exceptions import ApiException

    try:
        return json.loads(call(*args, _preload_content=False).data)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def lock_is_live(core: Any, lock: NodeLock, now: float) -> bool:
    """Whether the holder still waits for its Allocate: younger than the TTL, and the
    pod exists, is Pending and is ``bind-phase=allocating``, or has no phase yet (its
    bind is between taking the lock and writing the pod's annotations)."""
    if now - lock.since >= NODE_LOCK_TTL_S:
        return False
    holder = _read_json(core.read_namespaced_pod, lock.name, lock.namespace)
    if holder is None or (holder.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if (holder.get("status") or {}).get("phase") not in (None, "Pending"):  # admitted, or refused by the kubelet
        return False
    return ((holder.get("metadata") or {}).get("annotations") or {}).get(ANN_PHASE) in (None, PHASE_ALLOCATING)


CONFLICT_RETRIES = 8  # a node's resourceVersion moves with every kubelet status update


def _patch_lock(core: Any, node: str, decide: Any) -> Any:
    """Read the node, let ``decide(annotations)`` return the lock value to write (None:
    remove it) or raise / return ``_UNCHANGED``, and write it on that resourceVersion;
    a conflict (the kubelet wrote the node meanwhile) reads and decides again."""
    from kubernetes.client.exceptions import ApiException

    for _ in range(CONFLICT_RETRIES):
        obj = _read_json(core.read_node, node)
        if obj is None:
            return _UNCHANGED
        meta = obj.get("metadata") or {}
        value = decide(meta.get("annotations") or {})
        if value is _UNCHANGED:
            return _UNCHANGED
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": {NODE_LOCK: value}}}
        try:
            core.patch_node(node, body, _content_type="application/merge-patch+json")
            return value
        except ApiException as exc:
            if exc.status != 409:
                raise
    raise NodeLockConflict(
        f"hami-like: node {node} kept changing while its lock was written ({CONFLICT_RETRIES} tries)"
    )


_UNCHANGED = object()


def _release_lock(kube: Any, node: str, namespace: str, name: str) -> None:
    """Release the node lock through the device plugin's API access: its own method
    where it has one (a test's fake), else its ``CoreV1Api`` (``core``)."""
    own = getattr(kube, "release_node_lock", None)
    if own is not None:
        own(node, namespace, name)
    else:
        release_node_lock(kube.core, node, namespace, name)


class NodeLockConflict(RuntimeError):
    """The node's resourceVersion moved on every try."""


def release_node_lock(core: Any, node: str, namespace: str, name: str) -> bool:
    """Remove the node's lock if ``namespace/name`` holds it; False if someone else does."""

    def decide(annotations: Mapping[str, str]) -> Any:
        held = parse_lock(annotations.get(NODE_LOCK, ""))
        return None if held is not None and (held.namespace, held.name) == (namespace, name) else _UNCHANGED

    return _patch_lock(core, node, decide) is not _UNCHANGED


# ---- extender -----------------------------------------------------------------------------
class HamiLikeExtender(ReferenceExtender):
    name = HAMI_LIKE
    description = (
        "kube-scheduler extender behaving like HAMi's scheduler: nvidia.com/gpu=M cards with "
        "nvidia.com/gpumem=X MiB on each, on one node; writes hami.io/* pod annotations."
    )
    unit = "MiB"
    default_prefix = EXTENDER_PREFIX
    fast_node_view = False
    serves_inspect = False  # HAMi's scheduler serves no view of its allocations

    def serving_line(self, address: str, port: int, prefix: str, how: str, policy: str) -> str:
        return f"listen on {address}:{port}"  # HAMi's scheduler's words

    def started(self, api: Any) -> None:
        """As HAMi's scheduler, label this pod the leader (one replica: always elected),
        so that the Service selecting ``hami.io/scheduler-role=leader`` reaches it."""
        import os

        from kubernetes import client

        name, namespace = os.environ.get("POD_NAME"), os.environ.get("POD_NAMESPACE")
        if not (name and namespace):
            log.warning("POD_NAME/POD_NAMESPACE unset: not labelling this pod %s=leader", ROLE_LABEL)
            return
        for attempt in range(30):
            try:
                client.CoreV1Api(api).patch_namespaced_pod(
                    name, namespace, {"metadata": {"labels": {ROLE_LABEL: "leader"}}}
                )
                log.info("Successfully patched leader label to hami scheduler pod")
                return
            except Exception as exc:  # the API may not answer yet; retry as HAMi does on its tick
                log.warning("Failed to patch the leader label to hami scheduler pod: %s", exc)
                time.sleep(min(2.0, 0.2 * (attempt + 1)))

    def is_share_pod(self, pod: Mapping[str, Any]) -> bool:
        containers = (pod.get("spec") or {}).get("containers") or []
        return any((_quantity(c, RESOURCE_GPU) or 0) > 0 for c in containers)

    def share_request(self, pod: Mapping[str, Any]) -> ShareRequest:
        shares, counts = [], set()
        for index, container in enumerate((pod.get("spec") or {}).get("containers") or []):
            cards, mib = container_request(container)
            if cards:
                counts.add(cards)
                shares.append(ContainerShare(index=index, name=str(container.get("name", "")), gib=cards * mib))
        if not shares:
            raise ShareRequestError(f"hami-like: pod requests no {RESOURCE_GPU}")
        if len(counts) > 1:
            raise ShareRequestError(
                f"hami-like: the containers ask different {RESOURCE_GPU} counts {sorted(counts)}; "
                "this variant places all of a pod's containers on the same cards"
            )
        return ShareRequest(count=counts.pop(), total_gib=sum(s.gib for s in shares), containers=tuple(shares))

    def node_source(self, node: Mapping[str, Any]) -> NodeSource:
        meta = node.get("metadata") or {}
        return NodeSource(str(meta.get("name", "")), card_source((meta.get("annotations") or {}).get(NODE_REGISTER)))

    def cards_from_source(self, name: str, source: Any) -> tuple[Card, ...]:
        raw = source[0]
        return () if raw is None else cards_from_register(name, raw)

    def misfit(
        self, node: str, cards: Sequence[Card], used: Mapping[int, int], count: int, per_card: int
    ) -> Misfit | None:
        total = len(cards)
        if count > total:
            return Misfit(
                f"hami-like: node {node}: {NODE_INSUFFICIENT_DEVICE}: {RESOURCE_GPU}={count} cards asked, "
                f"the node has {total}",
                True,
            )
        small = sum(1 for c in cards if c.total_gib < per_card)
        if total - small < count:
            return Misfit(
                f"hami-like: node {node}: {small}/{total} {CARD_INSUFFICIENT_MEMORY}: {RESOURCE_GPUMEM}={per_card} "
                f"MiB per card is more than the card memory "
                f"({', '.join(f'{c.total_gib} MiB' for c in cards)})",
                True,
            )
        short = sum(1 for c in cards if not (c.healthy and c.total_gib - used.get(c.index, 0) >= per_card))
        if total - short < count:
            return Misfit(
                f"hami-like: node {node}: {short}/{total} {CARD_INSUFFICIENT_MEMORY}: {count} card(s) with "
                f"{per_card} MiB free needed, {total - short} have it",
                False,
            )
        return None

    def bind_annotations(self, alloc: Allocation, cards: Sequence[Card], pod: Mapping[str, Any]) -> dict[str, str]:
        uuid_of = {c.index: c.uuid for c in cards}
        n = len((pod.get("spec") or {}).get("containers") or [])
        containers = [[(uuid_of[i], mib) for i, mib in sorted(alloc.containers.get(k, {}).items())] for k in range(n)]
        devices = encode_devices(containers)
        return {
            ANN_ALLOCATED: devices,
            ANN_TO_ALLOCATE: devices,
            ANN_NODE: alloc.node,
            ANN_PHASE: PHASE_ALLOCATING,
            ANN_BIND_TIME: str(alloc.assume_time_ns // 1_000_000_000),
        }

    def lock_node(self, core: Any, pod: Mapping[str, Any], node: str) -> None:
        """Take ``hami.io/mutex.lock`` on the node, or refuse the bind while another pod's
        allocation is under way there (the scheduler retries the pod after a back-off)."""
        from gpushare_stack.extender.errors import BindError

        meta = pod.get("metadata") or {}
        me = (str(meta.get("namespace", "")), str(meta.get("name", "")))

        def decide(annotations: Mapping[str, str]) -> Any:
            now = time.time()
            held = parse_lock(annotations.get(NODE_LOCK, ""))
            if held is not None and (held.namespace, held.name) != me and lock_is_live(core, held, now):
                raise BindError(
                    f"hami-like: node {node} is locked by pod {held.namespace}/{held.name} since "
                    f"{time.strftime('%H:%M:%S', time.gmtime(held.since))} (its allocation is under way); "
                    f"{me[0]}/{me[1]} is bound after it"
                )
            return lock_value(me[0], me[1], now)

        try:
            taken = _patch_lock(core, node, decide)
        except NodeLockConflict as exc:
            raise BindError(str(exc)) from exc
        if taken is _UNCHANGED:
            raise BindError(f"hami-like: node {node} does not exist")

    def bind_finished(self, node: str) -> None:
        """The node lock stays until the device plugin has allocated the pod."""

    def unlock_node(self, core: Any, pod: Mapping[str, Any], node: str) -> None:
        meta = pod.get("metadata") or {}
        try:
            release_node_lock(core, node, str(meta.get("namespace", "")), str(meta.get("name", "")))
        except Exception as exc:  # the lock goes stale by itself; the bind's own error matters more
            log.warning("hami-like: could not release the lock of node %s: %s", node, exc)

    def allocation_from_pod(self, pod: Mapping[str, Any], cards_of: CardsOf) -> Allocation | None:
        meta = pod.get("metadata") or {}
        ann = meta.get("annotations") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or ANN_ALLOCATED not in ann:
            return None
        where = f"pod {meta.get('namespace')}/{meta.get('name')}"
        cards = cards_of(node)
        if cards is None:
            raise NodeNotKnown(node)
        index_of = {c.uuid: c.index for c in cards}
        containers: dict[int, dict[int, int]] = {}
        for k, devs in enumerate(decode_devices(ann[ANN_ALLOCATED])):
            for uuid, mib in devs:
                if uuid not in index_of:
                    raise AllocationAnnotationError(
                        f"hami-like: {ANN_ALLOCATED} of {where} names card {uuid}, which node {node} does not have"
                    )
                containers.setdefault(k, {})[index_of[uuid]] = mib
        raw_time = str(ann.get(ANN_BIND_TIME, "0"))
        return Allocation(
            uid=str(meta.get("uid", "")),
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            node=node,
            containers=containers,
            assume_time_ns=int(raw_time) * 1_000_000_000 if raw_time.isdigit() else 0,
        )


# ---- device plugin --------------------------------------------------------------------------
class HamiMatchError(LookupError):
    """No pending pod of the node waits for an Allocate of this many cards."""


@dataclass(frozen=True)
class HamiMatch:
    namespace: str
    name: str
    container_index: int
    devices: tuple[tuple[str, int], ...]  # (uuid, MiB) per card, in container order
    to_allocate: str  # the pod's new hami.io/vgpu-devices-to-allocate
    pod_done: bool


def match_pod(pods: Iterable[Mapping[str, Any]], node: str, cards: int) -> HamiMatch:
    """The container an Allocate of ``cards`` devices is for: the pending pod on ``node``
    with ``bind-phase=allocating`` bound earliest, its first container still in
    ``hami.io/vgpu-devices-to-allocate`` (the kubelet allocates containers in order)."""
    candidates, skipped = [], []
    for pod in pods:
        meta = pod.get("metadata") or {}
        ann = meta.get("annotations") or {}
        if (pod.get("spec") or {}).get("nodeName") != node or (pod.get("status") or {}).get("phase") != "Pending":
            continue
        if meta.get("deletionTimestamp") or ann.get(ANN_PHASE) != PHASE_ALLOCATING:
            continue
        if ann.get(ANN_NODE, node) != node or ANN_TO_ALLOCATE not in ann:
            continue
        try:
            todo = decode_devices(ann[ANN_TO_ALLOCATE])
        except AllocationAnnotationError as exc:
            skipped.append(f"{meta.get('namespace')}/{meta.get('name')}: {exc}")
            continue
        nxt = next((k for k, devs in enumerate(todo) if devs), None)
        if nxt is None:
            continue
        bind_time = str(ann.get(ANN_BIND_TIME, "0"))
        candidates.append((int(bind_time) if bind_time.isdigit() else 0, meta, todo, nxt))
    candidates.sort(key=lambda c: (c[0], c[1].get("namespace", ""), c[1].get("name", "")))
    for _t, meta, todo, nxt in candidates:
        if len(todo[nxt]) != cards:
            skipped.append(f"{meta.get('namespace')}/{meta.get('name')}: next container wants {len(todo[nxt])} cards")
            continue
        devices = tuple(todo[nxt])
        rest = [devs if k != nxt else [] for k, devs in enumerate(todo)]
        return HamiMatch(
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            container_index=nxt,
            devices=devices,
            to_allocate=encode_devices(rest),
            pod_done=not any(rest),
        )
    detail = f"; skipped: {'; '.join(skipped)}" if skipped else ""
    raise HamiMatchError(
        f"hami-like: no pending pod on node {node} with {ANN_PHASE}={PHASE_ALLOCATING} waits for "
        f"{cards} {RESOURCE_GPU} device(s) (was it scheduled by the hami-like extender?){detail}"
    )


def container_environment(
    devices: Sequence[tuple[str, int]], native_host_dir: str = contract.HOST_NATIVE_DIR
) -> tuple[dict[str, str], list[Any]]:
    """Env and mounts for a container holding ``devices`` ((uuid, MiB) per card)."""
    from gpushare_stack.deviceplugin.environment import HostMount

    env = {
        contract.ENV_VISIBLE: ",".join(uuid for uuid, _ in devices),
        contract.ENV_LD_PRELOAD: SHIM_PATH,
    }
    for i, (_uuid, mib) in enumerate(devices):
        env[f"{ENV_LIMIT_PREFIX}{i}"] = f"{mib}m"
    return env, [HostMount(contract.CONTAINER_NATIVE_DIR, native_host_dir.rstrip("/"))]


def virtual_device_uuid(device_id: str) -> str:
    uuid, sep, k = device_id.rpartition("-")
    if not sep or not uuid or not k.isdigit():
        raise ValueError(f"hami-like: device ID {device_id!r} is not of the form <uuid>-<k>")
    return uuid


class HamiLikeDevicePlugin(ReferenceDevicePlugin):
    name = HAMI_LIKE
    description = (
        "Kubelet device plugin behaving like HAMi's: registers nvidia.com/gpu with 10 virtual "
        "devices per card, writes hami.io/node-nvidia-register, and gives a container its cards "
        "with CUDA_DEVICE_MEMORY_LIMIT_<i> and the hami-like isolation library."
    )

    def registered_line(self, resource: str, endpoint: str, kubelet_socket: str) -> str:
        return f"Registered device plugin for '{resource}' with Kubelet"  # HAMi's words

    def resources(self, plugin: Any) -> list[Any]:
        from gpushare_stack.deviceplugin.devices import Device
        from gpushare_stack.deviceplugin.grpc_server import ResourcePlugin

        def devices() -> list[Device]:
            return [
                Device(f"{c.uuid}-{k}", plugin.healthy.get(c.uuid, True))
                for c in plugin.cards
                for k in range(DEVICE_SPLIT_COUNT)
            ]

        return [ResourcePlugin(RESOURCE_GPU, PLUGIN_SOCKET, devices, lambda req, ctx: self.allocate(plugin, req, ctx))]

    def node_annotations(self, cards: list[Any], healthy: dict[str, bool]) -> dict[str, str]:
        return {
            NODE_REGISTER: register_annotation(cards, healthy),
            NODE_HANDSHAKE: "Reported_" + time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        }

    def allocate(self, plugin: Any, request: Any, context: grpc.ServicerContext) -> Any:
        from gpushare_stack.api import api_pb2
        from gpushare_stack.deviceplugin.plugin import container_response

        known = {c.uuid for c in plugin.cards}
        responses = []
        for creq in request.container_requests:
            ids = list(creq.devices_ids)
            for device_id in ids:
                try:
                    uuid = virtual_device_uuid(device_id)
                except ValueError as exc:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
                if uuid not in known:
                    context.abort(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"hami-like: device ID {device_id!r} names no card of node {plugin.node}",
                    )
            if plugin.kube is None:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "hami-like: no API client, cannot find the pod")
            try:
                with plugin.alloc_lock:
                    match = match_pod(plugin.kube.pending_pods(plugin.node), plugin.node, len(ids))
                    missing = [u for u, _ in match.devices if u not in known]
                    if missing:
                        raise HamiMatchError(
                            f"hami-like: pod {match.namespace}/{match.name} was given cards {missing} "
                            f"that node {plugin.node} does not have"
                        )
                    update = {ANN_TO_ALLOCATE: match.to_allocate}
                    if match.pod_done:
                        update[ANN_PHASE] = PHASE_SUCCESS
                    plugin.kube.patch_pod_annotations(match.namespace, match.name, update)
                    if match.pod_done:
                        try:
                            _release_lock(plugin.kube, plugin.node, match.namespace, match.name)
                        except Exception as exc:  # the pod is served; its lock goes stale once it runs
                            log.warning("hami-like: could not release the lock of node %s: %s", plugin.node, exc)
            except HamiMatchError as exc:
                log.error("%s", exc)
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
            except Exception as exc:  # API server errors
                log.error("Allocate: %s", exc)
                context.abort(grpc.StatusCode.UNAVAILABLE, f"hami-like: Allocate failed: {exc}")
            env, mounts = container_environment(match.devices, plugin.native_host_dir)
            log.info(
                "Allocate %s/%s container %d: cards %s",
                match.namespace,
                match.name,
                match.container_index,
                [f"{u} {m} MiB" for u, m in match.devices],
            )
            responses.append(container_response(env, mounts))
        return api_pb2.AllocateResponse(container_responses=responses)
