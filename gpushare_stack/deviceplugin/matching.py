"""Which pod an Allocate call is for.

Allocate only receives device IDs, so, as in the open gpushare stack, the plugin looks
for a pending pod on its node that the extender annotated (``..._ASSIGNED=false``) with
a container asking exactly that many GiB, oldest assume time first. Pure logic over
pod dicts (API JSON), so it is tested without a cluster; ``kube.py`` feeds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpushare_stack import contract
from gpushare_stack.allocation import AllocationAnnotationError, allocation_from_pod
from gpushare_stack.request import ShareRequestError, container_gib


class AllocationMatchError(LookupError):
    """No pod matches the Allocate call (message says what was looked for)."""


@dataclass(frozen=True)
class Match:
    """The container an Allocate call serves, and its share."""

    namespace: str
    name: str
    uid: str
    container_index: int
    container_name: str
    cards: tuple[int, ...]  # physical card indices, in container order
    per_card_gib: int  # this container's share of its first card (ALIYUN_COM_GPU_MEM_CONTAINER)
    pod_total_gib: int  # the pod's total (ALIYUN_COM_GPU_MEM_POD)
    pod_done: bool  # every gpu-mem container of the pod now allocated
    shares_gib: tuple[int, ...] = ()  # this container's GiB on each of ``cards``, same order


def _assume_time(ann: Mapping[str, str]) -> int | None:
    raw = ann.get(contract.ANN_ASSUME_TIME, "")
    return int(raw) if raw.isdigit() else None


def _container_cards(pod: Mapping[str, Any], index: int, gib: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Cards of container ``index`` and its GiB on each, from the pod's annotations.

    ACK's allocation annotation carries GiB per card, and the limits follow it as
    written (they must add up to the container's gpu-mem): the device plugin does not
    re-derive N/M, so a scheduler that splits unevenly is seen in the container.
    """
    alloc = allocation_from_pod(pod)
    if alloc is None:
        raise AllocationAnnotationError("no allocation annotations")
    ann = pod["metadata"]["annotations"]
    if contract.ANN_ACK_ALLOCATION in ann:
        cards = alloc.containers.get(index)
        if not cards:
            raise AllocationAnnotationError(f"{contract.ANN_ACK_ALLOCATION} has no entry for container {index}")
        if sum(cards.values()) != gib or min(cards.values()) < 0:
            raise AllocationAnnotationError(
                f"{contract.ANN_ACK_ALLOCATION} gives container {index} {dict(cards)}, "
                f"which does not add up to its {contract.RESOURCE_MEM}={gib}"
            )
        order = tuple(sorted(cards))
        return order, tuple(cards[i] for i in order)
    cards = alloc.cards
    if gib % len(cards):
        raise AllocationAnnotationError(
            f"{contract.RESOURCE_MEM}={gib} does not split over {contract.ANN_IDX}={','.join(map(str, cards))}"
        )
    return cards, (gib // len(cards),) * len(cards)


def match_allocation(
    pods: Iterable[Mapping[str, Any]],
    node: str,
    requested_gib: int,
    progress: Mapping[str, set[int]],
) -> Match:
    """The container a gpu-mem Allocate of ``requested_gib`` devices is for.

    ``progress`` maps pod UID to container indices this plugin already allocated (the
    kubelet allocates a pod's containers one by one, in order).
    """
    candidates = []
    skipped = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        ann = meta.get("annotations") or {}
        spec = pod.get("spec") or {}
        if spec.get("nodeName") != node or (pod.get("status") or {}).get("phase") != "Pending":
            continue
        if meta.get("deletionTimestamp") or ann.get(contract.ANN_ASSIGNED) != "false":
            continue
        assume = _assume_time(ann)
        if assume is None or contract.ANN_IDX not in ann:
            continue
        uid = str(meta.get("uid", ""))
        done = progress.get(uid, set())
        try:
            wanted = [(i, c) for i, c in enumerate(spec.get("containers") or []) if container_gib(c) > 0]
        except ShareRequestError as exc:
            skipped.append(f"{meta.get('namespace')}/{meta.get('name')}: {exc}")
            continue
        for index, container in wanted:
            if index in done:
                continue
            if container_gib(container) == requested_gib:
                candidates.append((assume, meta.get("namespace", ""), meta.get("name", ""), pod, index, wanted))
            break  # the kubelet allocates containers in order: only the next one can match
    candidates.sort(key=lambda c: (c[0], c[1], c[2]))
    for _assume, namespace, name, pod, index, wanted in candidates:
        container = wanted[[i for i, _ in wanted].index(index)][1]
        try:
            cards, shares = _container_cards(pod, index, requested_gib)
            total = int(pod["metadata"]["annotations"].get(contract.ANN_POD, "0"))
        except (AllocationAnnotationError, ValueError) as exc:
            skipped.append(f"{namespace}/{name}: {exc}")
            continue
        uid = str(pod["metadata"].get("uid", ""))
        done = set(progress.get(uid, set())) | {index}
        return Match(
            namespace=namespace,
            name=name,
            uid=uid,
            container_index=index,
            container_name=str(container.get("name", "")),
            cards=cards,
            per_card_gib=shares[0],
            pod_total_gib=total,
            pod_done=all(i in done for i, _ in wanted),
            shares_gib=shares,
        )
    detail = f"; skipped: {'; '.join(skipped)}" if skipped else ""
    raise AllocationMatchError(
        f"gpushare: no pending pod on node {node} has a container asking "
        f"{contract.RESOURCE_MEM}={requested_gib} with {contract.ANN_ASSIGNED}=false "
        f"(was the pod scheduled by the gpushare extender?){detail}"
    )
