"""The share a pod asks for, read from its spec and labels.

The reference stack validates requests itself instead of importing the suite's
``gpushare_conformance.allocation``: the stack is the system under test, and a bug
shared between judge and judged would go unseen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpushare_stack import contract


class ShareRequestError(ValueError):
    """A pod's GPU-share request breaks a rule; the message names rule and values."""


@dataclass(frozen=True)
class ContainerShare:
    """One container's part: ``index`` in spec.containers, ``gib`` in total."""

    index: int
    name: str
    gib: int


@dataclass(frozen=True)
class ShareRequest:
    """A pod's request: ``count`` cards, ``per_card_gib`` on each (sum of containers)."""

    count: int
    total_gib: int
    containers: tuple[ContainerShare, ...]

    @property
    def per_card_gib(self) -> int:
        return self.total_gib // self.count

    def container_per_card(self, share: ContainerShare) -> int:
        return share.gib // self.count


def _parse_int(value: Any, what: str) -> int:
    text = str(value).strip()
    if not text.isdigit():
        raise ShareRequestError(f"gpushare: {what} must be a non-negative integer, got {value!r}")
    return int(text)


def container_gib(container: Mapping[str, Any]) -> int:
    """The container's ``aliyun.com/gpu-mem`` (limits, else requests); 0 if absent."""
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        values = resources.get(section) or {}
        if contract.RESOURCE_MEM in values:
            return _parse_int(
                values[contract.RESOURCE_MEM],
                f"{contract.RESOURCE_MEM} of container {container.get('name')!r}",
            )
    return 0


def is_share_pod(pod: Mapping[str, Any]) -> bool:
    """Whether any container of the pod asks for ``aliyun.com/gpu-mem``."""
    containers = (pod.get("spec") or {}).get("containers") or []
    return any(container_gib(c) > 0 for c in containers)


def share_request(pod: Mapping[str, Any], *, integer_rule: bool = True) -> ShareRequest:
    """Read and check a pod's request (API JSON form, camelCase keys).

    Rules: gpu-count label is an integer >= 1; every container's gpu-mem is divisible
    by the count (each card gives the same share); the pod asks for some gpu-mem.
    ``integer_rule=False`` only serves the ``ignore-integer-rule`` fault (``gpushare_doubles/faults.py``).
    """
    labels = (pod.get("metadata") or {}).get("labels") or {}
    raw_count = labels.get(contract.LABEL_COUNT, "1")
    count = _parse_int(raw_count, f"label {contract.LABEL_COUNT}")
    if count < 1:
        raise ShareRequestError(f"gpushare: label {contract.LABEL_COUNT} must be >= 1, got {raw_count!r}")
    containers = (pod.get("spec") or {}).get("containers") or []
    shares = []
    for index, container in enumerate(containers):
        gib = container_gib(container)
        if gib == 0:
            continue
        if gib % count and integer_rule:
            raise ShareRequestError(
                f"gpushare: N/M must be an integer: {contract.RESOURCE_MEM}={gib}, "
                f"{contract.RESOURCE_COUNT}={count} gives {gib / count:.2f} GiB per card"
                + (f" (container {container.get('name')!r})" if len(containers) > 1 else "")
            )
        shares.append(ContainerShare(index=index, name=str(container.get("name", "")), gib=gib))
    if not shares:
        raise ShareRequestError(f"gpushare: pod requests no {contract.RESOURCE_MEM}")
    return ShareRequest(count=count, total_gib=sum(s.gib for s in shares), containers=tuple(shares))
