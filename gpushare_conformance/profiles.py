"""Stack profiles: how each GPU-sharing stack spells the seed's request and its evidence.

The checks speak of "N GiB over M cards"; a profile turns that into the pod labels and
resource limits a given stack understands, says which node resources prove the stack
is installed, and reads back from a scheduled pod which cards it was given. One check
suite can so judge the reference stack, ACK's, the open-source gpushare and HAMi.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpushare_conformance.dra_request import DraSpelling, claim_template

GIB_MIB = 1024


class ProfileError(ValueError):
    """Unknown profile, a request the profile cannot express, or a cluster mismatch."""


@dataclass(frozen=True)
class PodRequest:
    """What goes into a pod for one share request: template labels and container limits."""

    labels: dict[str, str]
    limits: dict[str, str]
    # DRA: the ResourceClaimTemplate (unnamed) the pod's first container uses instead.
    claim_template: dict[str, Any] | None = None


@dataclass(frozen=True)
class StackProfile:
    """One stack's names and promises.

    ``memory_resource``/``count_resource`` are the node's extended resources;
    ``per_card_mib`` means the pod asks memory per card in MiB (HAMi) rather than a
    pod total in GiB (Alibaba's form); ``max_cards`` is the most cards the stack's
    documentation says one pod may span (1 for the open-source gpushare).

    Nothing here decides a verdict. ``max_cards`` only sizes the requests of checks
    about *other* rules (a lifecycle check on gpushare asks one card, so a known gap
    does not hide whether capacity comes back); the checks of the multi-card rules ask
    the seed's request whatever the profile says, and judge what the stack did.
    ``known_gaps`` (rule ids of ``rules.RULES``) only changes how a failure is worded
    in the summary: "FAIL (known gap)", still a failure.
    """

    name: str
    description: str
    memory_resource: str
    count_resource: str | None
    count_label: str | None
    per_card_mib: bool
    max_cards: int | None
    node_resources: tuple[str, ...]
    stack_namespace: str
    extender_selector: str | None
    device_plugin_selector: str
    inspect_path: str | None = None
    # Where the extender serves its verbs is found from the API (the Services selecting
    # its pods, their ports, the host network: fixtures/framework/extender.py); this
    # port, when set, is tried first on each extender pod. None: found, not assumed.
    extender_port: int | None = None
    # The path the verbs hang under (``<prefix>/bind``); "" for a stack serving ``/bind``.
    extender_prefix: str = ""
    # How the extender's inspect is read through the API server's pod proxy first
    # (https: TLS); the other scheme is tried after it.
    extender_scheme: str = "http"
    # The device plugin's container in its pod, where the pod has several (the suite
    # otherwise takes the one mounting the kubelet's device-plugin directory).
    device_plugin_container: str | None = None
    # Pod annotations the scheduler writes with the cards it picked.
    allocation_annotations: tuple[str, ...] = field(default_factory=tuple)
    # Seed rules the stack's documentation says it does not meet (reported, never skipped).
    known_gaps: frozenset[str] = frozenset()
    # DRA stacks: how a claim asks for a share (device class, capacity, distinct
    # attribute, driver). Such a stack advertises no node resource; its nodes are those
    # with the driver's ResourceSlices, and a pod's cards are its claims' allocation.
    dra: DraSpelling | None = None

    @property
    def multi_card(self) -> bool:
        """Whether one pod may span several cards."""
        return self.max_cards is None or self.max_cards > 1

    def cards_for(self, node_cards: int) -> int:
        """The most cards a pod of this stack can take on a node with ``node_cards``."""
        return node_cards if self.max_cards is None else min(node_cards, self.max_cards)

    def pod_request(self, total_gib: int, cards: int | None) -> PodRequest:
        """Labels and limits asking ``total_gib`` GiB over ``cards`` cards.

        ``cards=None`` is single-GPU sharing written the seed's way: no count label.
        The request is rendered as asked even when it breaks the seed's rules (the
        restriction checks submit such requests on purpose) or goes past what the
        stack documents (gpushare gets the seed's label, as its users would write it,
        and the evidence shows what it made of it); only a request the stack's
        syntax cannot express at all raises ``ProfileError``.
        """
        if isinstance(total_gib, bool) or not isinstance(total_gib, int) or total_gib < 1:
            raise ProfileError(f"total_gib must be a positive integer, got {total_gib!r}")
        if cards is not None and (isinstance(cards, bool) or not isinstance(cards, int) or cards < 1):
            raise ProfileError(f"cards must be a positive integer or None, got {cards!r}")
        count = cards or 1
        if self.dra is not None:
            return PodRequest(labels={}, limits={}, claim_template=claim_template("", total_gib, cards, self.dra))
        if self.per_card_mib:
            if total_gib * GIB_MIB % count:
                raise ProfileError(
                    f"profile {self.name!r} asks memory per card in MiB: "
                    f"total_gib={total_gib} over cards={count} is not a whole MiB per card"
                )
            limits = {str(self.count_resource): str(count), self.memory_resource: str(total_gib * GIB_MIB // count)}
            return PodRequest(labels={}, limits=limits)
        labels = {}
        if cards is not None and self.count_label:
            labels[self.count_label] = str(cards)
        return PodRequest(labels=labels, limits={self.memory_resource: str(total_gib)})

    def check_node(self, node: Mapping[str, Any]) -> None:
        """Raise ``ProfileError`` unless the node advertises this profile's resources."""
        if self.dra is not None:
            return  # a DRA stack's nodes are known by their ResourceSlices, not allocatable
        name = (node.get("metadata") or {}).get("name", "?")
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        missing = [r for r in self.node_resources if r not in allocatable]
        if missing:
            raise ProfileError(
                f"profile {self.name!r} does not match node {name!r}: it does not advertise "
                f"{', '.join(missing)} (allocatable has: {', '.join(sorted(allocatable)) or 'nothing'}); "
                f"pick the --gpushare-stack the cluster runs (run: --stack), or deploy it with --gpushare-deploy-stack"
            )

    def allocated_cards(self, pod: Mapping[str, Any]) -> list[str]:
        """Card identifiers (indices or UUIDs) the scheduler wrote into the pod's annotations.

        Raises ``ProfileError`` when none of the profile's annotations is present or one
        is malformed, so a check never mistakes "not written" for "no cards".
        """
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        for key in self.allocation_annotations:
            if key in annotations:
                return _parse_allocation(key, annotations[key])
        raise ProfileError(
            f"pod {(pod.get('metadata') or {}).get('name', '?')!r} has none of the allocation "
            f"annotations of profile {self.name!r} ({', '.join(self.allocation_annotations)})"
        )


def _parse_allocation(key: str, value: str) -> list[str]:
    """Read one allocation annotation into the list of cards (duplicates kept)."""
    text = str(value).strip()
    if key == "scheduler.framework.gpushare.allocation":
        try:
            data = json.loads(text)
            cards = [str(idx) for per_container in data.values() for idx in per_container]
        except (ValueError, AttributeError, TypeError) as exc:
            raise ProfileError(f"annotation {key}={value!r} is not {{container: {{card: GiB}}}} JSON: {exc}") from exc
        return sorted(set(cards), key=_card_sort_key) if cards else _empty(key, value)
    if key == "hami.io/vgpu-devices-allocated":
        # "GPU-uuid,NVIDIA,4096,0:GPU-uuid2,NVIDIA,4096,0:;" — containers by ';', cards by ':'.
        cards = []
        for container in text.split(";"):
            for device in container.split(":"):
                if device.strip():
                    cards.append(device.split(",")[0].strip())
        return cards or _empty(key, value)
    cards = [part.strip() for part in text.split(",") if part.strip()]
    if not cards or not all(c.isascii() and c.isdigit() for c in cards):
        raise ProfileError(f"annotation {key}={value!r} is not a comma list of card indices")
    return cards


def _empty(key: str, value: str) -> list[str]:
    raise ProfileError(f"annotation {key}={value!r} names no card")


def _card_sort_key(card: str) -> tuple[int, str]:
    return (int(card), "") if card.isascii() and card.isdigit() else (1 << 30, card)


_ALIYUN_MEM = "aliyun.com/gpu-mem"
# The reference DRA driver (gpushare_stack/dra; manifests/overlays/dra).
_DRA_DRIVER = "gpu.gpushare.conformance.io"
_ALIYUN_COUNT = "aliyun.com/gpu-count"
# Rule ids (rules.RULES) a stack without multi-card sharing, or without memory isolation, breaks.
_MULTI_CARD_RULES = frozenset({"multi_gpu_share", "card_count", "integer_share", "same_node", "distinct_cards"})
_ISOLATION_RULES = frozenset(
    {
        "isolation_smi",
        "isolation_log",
        "alloc_past_share_refused",
        "one_budget_per_container",
        "hostile_environment",
        "hostile_accounting",
        "hostile_descendants",
        "hostile_loader",
        "hostile_stream_card",
        "hostile_processes",
        "hostile_namespaces",
        "beyond_interposition",
    }
)


PROFILES: dict[str, StackProfile] = {
    "reference": StackProfile(
        name="reference",
        description="this project's extender + device plugin + isolation shim",
        memory_resource=_ALIYUN_MEM,
        count_resource=_ALIYUN_COUNT,
        count_label=_ALIYUN_COUNT,
        per_card_mib=False,
        max_cards=None,
        node_resources=(_ALIYUN_MEM, _ALIYUN_COUNT),
        stack_namespace="gpushare-system",
        extender_selector="app=gpushare-extender",
        device_plugin_selector="app=gpushare-device-plugin",
        inspect_path="/gpushare-scheduler/inspect",
        extender_prefix="/gpushare-scheduler",
        extender_scheme="https",
        allocation_annotations=("ALIYUN_COM_GPU_MEM_IDX", "scheduler.framework.gpushare.allocation"),
    ),
    "ack": StackProfile(
        name="ack",
        description="Alibaba Cloud ACK shared GPU scheduling with cGPU isolation",
        memory_resource=_ALIYUN_MEM,
        count_resource=_ALIYUN_COUNT,
        count_label=_ALIYUN_COUNT,
        per_card_mib=False,
        max_cards=None,
        node_resources=(_ALIYUN_MEM,),
        stack_namespace="kube-system",
        extender_selector=None,
        device_plugin_selector="component=gpushare-device-plugin",
        allocation_annotations=("scheduler.framework.gpushare.allocation", "ALIYUN_COM_GPU_MEM_IDX"),
    ),
    "gpushare": StackProfile(
        name="gpushare",
        description="open-source AliyunContainerService gpushare (single card, no isolation)",
        memory_resource=_ALIYUN_MEM,
        count_resource=_ALIYUN_COUNT,
        # gpushare has no multi-card sharing; its users still write the seed's label.
        count_label=_ALIYUN_COUNT,
        per_card_mib=False,
        max_cards=1,
        node_resources=(_ALIYUN_MEM,),
        stack_namespace="kube-system",
        extender_selector="app=gpushare,component=gpushare-schd-extender",
        device_plugin_selector="component=gpushare-device-plugin",
        inspect_path="/gpushare-scheduler/inspect",
        extender_prefix="/gpushare-scheduler",
        allocation_annotations=("ALIYUN_COM_GPU_MEM_IDX",),
        # Its README: one card per pod, and "GPU memory isolation is not supported". Its
        # device plugin finds the pod of an Allocate as the earliest-assumed one with the
        # same request, which the kubelet's admission order need not follow: pods with one
        # request created together can get each other's cards (the burst rule).
        known_gaps=frozenset(_MULTI_CARD_RULES | _ISOLATION_RULES | {"bursts_not_overbooked"}),
    ),
    "hami": StackProfile(
        name="hami",
        description="HAMi (nvidia.com/gpu cards + nvidia.com/gpumem MiB per card)",
        memory_resource="nvidia.com/gpumem",
        count_resource="nvidia.com/gpu",
        count_label=None,
        per_card_mib=True,
        max_cards=None,
        node_resources=("nvidia.com/gpu",),
        stack_namespace="kube-system",
        extender_selector="app.kubernetes.io/component=hami-scheduler",
        device_plugin_selector="app.kubernetes.io/component=hami-device-plugin",
        extender_prefix="",  # HAMi serves /filter and /bind at the root
        device_plugin_container="device-plugin",
        allocation_annotations=("hami.io/vgpu-devices-allocated",),
    ),
    "dra": StackProfile(
        name="dra",
        description="this project's DRA driver (resource.k8s.io/v1 consumable capacity) + isolation shim",
        memory_resource="",
        count_resource=None,
        count_label=None,
        per_card_mib=False,
        max_cards=None,
        node_resources=(),
        stack_namespace="gpushare-system",
        extender_selector=None,
        device_plugin_selector="app=gpushare-dra-plugin",
        dra=DraSpelling(
            device_class=_DRA_DRIVER, distinct_attribute=f"{_DRA_DRIVER}/uuid", capacity="memory", driver=_DRA_DRIVER
        ),
    ),
}


def dra_profile(device_class: str, capacity: str, distinct_attribute: str, driver: str) -> StackProfile:
    """The ``dra`` profile for another DRA driver (the existing provider's options): the
    same checks, the claim spelled with that driver's class, capacity and attribute."""
    spelling = DraSpelling(
        device_class=device_class, distinct_attribute=distinct_attribute, capacity=capacity, driver=driver
    )
    return replace(PROFILES["dra"], description=f"DRA driver {driver} (class {device_class})", dra=spelling)


def get_profile(name: str) -> StackProfile:
    """The profile called ``name``; ``ProfileError`` listing the known ones otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ProfileError(f"unknown stack profile {name!r}; known: {', '.join(PROFILES)}") from None
