"""What a pod asks for under GPU memory sharing, and whether what it got matches.

A pod asks `resources.limits["aliyun.com/gpu-mem"]: N` (GiB, summed over its
containers) and label `aliyun.com/gpu-count: "M"` (absent = 1); it must get N/M GiB
on each of M cards of one node. Resource and label names are parameters so a stack
profile can rename them.

Tolerance rule of `check_card_total` (why: the seed's V100 shows 4309 MiB for a
4 GiB share, +5.2%, because the driver reports some reserved memory on top):

    share_mib <= observed_mib <= floor(share_mib * (1 + tolerance))   and   observed_mib < physical_mib

with `tolerance` = 0.10 by default. A total equal to the share passes; the physical
size of the card, or anything at or above it, fails even when the share is close to
a whole card.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gpushare_conformance.evidence.smi_report import NvidiaSmiReport
from gpushare_conformance.evidence.tf_log import TfLogReport
from gpushare_conformance.evidence.units import bytes_to_mib

GPU_MEM_RESOURCE = "aliyun.com/gpu-mem"
GPU_COUNT_LABEL = "aliyun.com/gpu-count"
DEFAULT_TOLERANCE = 0.10

_DECIMAL = re.compile(r"^[0-9]+$")


class RequestError(ValueError):
    """A pod's GPU-sharing request breaks a rule; names the field and the value."""

    def __init__(self, field: str, value: Any, message: str):
        self.field = field
        self.value = value
        super().__init__(message)


@dataclass(frozen=True)
class ShareRequest:
    """N GiB in total over M cards, N/M GiB per card.

    `container` is the name of the container that asks, or None when several do.
    """

    total_gib: int
    cards: int
    per_card_gib: int
    container: str | None

    @property
    def per_card_mib(self) -> int:
        return self.per_card_gib * 1024


def _pod_template(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """(object with `metadata` and `spec.containers`, path prefix used in messages)."""
    if not isinstance(obj, Mapping):
        raise RequestError(
            "object", obj, f"expected a Pod, a workload or a pod template as a mapping, got {type(obj).__name__}"
        )
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "PodTemplate" and "template" in obj:
        return obj["template"], "template"
    if kind == "CronJob":
        template = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template")
        if template is None:
            raise RequestError("spec.jobTemplate.spec.template", None, "CronJob without spec.jobTemplate.spec.template")
        return template, "spec.jobTemplate.spec.template"
    if isinstance(spec, Mapping) and "template" in spec:
        return spec["template"], "spec.template"
    if isinstance(spec, Mapping) and "containers" in spec:
        return obj, ""
    raise RequestError("spec", spec, f"{kind or 'object'} has neither spec.containers nor spec.template")


def _quantity(value: Any, field: str) -> int:
    if isinstance(value, bool) or not (
        isinstance(value, int) or (isinstance(value, str) and _DECIMAL.match(value.strip()))
    ):
        raise RequestError(field, value, f"{field} must be a positive integer (GiB), got {value!r}")
    number = int(value)
    if number < 1:
        raise RequestError(field, value, f"{field} must be a positive integer (GiB), got {value!r}")
    return number


def request_from_pod(
    obj: Mapping[str, Any],
    mem_resource: str = GPU_MEM_RESOURCE,
    count_label: str = GPU_COUNT_LABEL,
) -> ShareRequest:
    """The sharing request of a Pod, a Job (or other workload) or a pod template.

    Takes dicts as the Kubernetes API returns them (camelCase keys; quantities as
    strings or ints). Only `containers` count: init containers run before and do not
    hold the share.
    """
    template, prefix = _pod_template(obj)
    path = f"{prefix}." if prefix else ""
    labels = ((template.get("metadata") or {}).get("labels")) or {}
    containers = ((template.get("spec") or {}).get("containers")) or []
    if not containers:
        raise RequestError(f"{path}spec.containers", containers, f"{path}spec.containers is empty")

    total = 0
    askers: list[str] = []
    for position, container in enumerate(containers):
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        requests = resources.get("requests") or {}
        field = f"{path}spec.containers[{position}].resources.limits[{mem_resource}]"
        if mem_resource not in limits:
            if mem_resource in requests:
                raise RequestError(
                    field,
                    None,
                    f"{mem_resource} is set in requests but not in limits of container {container.get('name')!r}; extended resources need limits",
                )
            continue
        amount = _quantity(limits[mem_resource], field)
        if mem_resource in requests and str(requests[mem_resource]).strip() != str(limits[mem_resource]).strip():
            raise RequestError(
                field.replace(".limits[", ".requests["),
                requests[mem_resource],
                f"requests[{mem_resource}]={requests[mem_resource]!r} differs from limits={limits[mem_resource]!r}",
            )
        total += amount
        askers.append(str(container.get("name")))
    if not askers:
        raise RequestError(
            f"{path}spec.containers[*].resources.limits[{mem_resource}]",
            None,
            f"no container sets resources.limits[{mem_resource}]",
        )

    label_field = f"{path}metadata.labels[{count_label}]"
    if count_label in labels:
        raw = labels[count_label]
        if not isinstance(raw, str) or not _DECIMAL.match(raw):
            raise RequestError(label_field, raw, f'label {count_label} must be a string integer like "2", got {raw!r}')
        cards = int(raw)
        if cards < 1:
            raise RequestError(label_field, raw, f"label {count_label} must be at least 1, got {raw!r}")
    else:
        cards = 1

    if total % cards:
        raise RequestError(
            f"{path}spec.containers[*].resources.limits[{mem_resource}]",
            total,
            f"invalid replica for resource {mem_resource}: {total} / {cards} = {total / cards:.2f} is not an integer",
        )
    return ShareRequest(
        total_gib=total, cards=cards, per_card_gib=total // cards, container=askers[0] if len(askers) == 1 else None
    )


@dataclass(frozen=True)
class Verdict:
    """One check's outcome, with what was expected and what was seen."""

    check: str
    expected: Any
    observed: Any
    passed: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_card_count(observed: int, expected: int) -> Verdict:
    """The pod sees exactly the cards it asked for."""
    passed = observed == expected
    detail = f"{observed} card(s) visible, {expected} expected" + ("" if passed else " (mismatch)")
    return Verdict("card_count", expected, observed, passed, detail)


def check_card_total(
    observed_mib: int | None,
    share_gib: int,
    physical_mib: int | None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Verdict:
    """A card's reported total is the share (within `tolerance` above it), not the card.

    See the module docstring for the rule. `physical_mib` None means the card size is
    unknown; then only the share window applies.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    share_mib = share_gib * 1024
    upper = math.floor(share_mib * (1 + tolerance))
    expected = {"min_mib": share_mib, "max_mib": upper, "below_physical_mib": physical_mib}
    if observed_mib is None:
        return Verdict("card_total", expected, None, False, "the card's total memory was not reported")
    if physical_mib is not None and observed_mib >= physical_mib:
        detail = f"{observed_mib} MiB is the card's physical size or more ({physical_mib} MiB): memory is not isolated"
        return Verdict("card_total", expected, observed_mib, False, detail)
    if observed_mib < share_mib:
        detail = f"{observed_mib} MiB is below the {share_gib} GiB share ({share_mib} MiB)"
        return Verdict("card_total", expected, observed_mib, False, detail)
    if observed_mib > upper:
        detail = f"{observed_mib} MiB exceeds the {share_gib} GiB share by more than {tolerance:.0%} (max {upper} MiB)"
        return Verdict("card_total", expected, observed_mib, False, detail)
    over = (observed_mib - share_mib) / share_mib
    detail = f"{observed_mib} MiB for a {share_gib} GiB share (+{over:.1%}, allowed +{tolerance:.0%})"
    return Verdict("card_total", expected, observed_mib, True, detail)


def card_totals_mib(report: NvidiaSmiReport | TfLogReport) -> dict[int, int | None]:
    """Per-card total memory in MiB by index, from either kind of report.

    None where the evidence gives no total (nvidia-smi `-L`, a MIG card's `N/A`, a TF
    2.6+ log that only prints the allocator limit): the limit is not the card total.
    """
    if isinstance(report, NvidiaSmiReport):
        return {gpu.index: gpu.memory_total_mib for gpu in report.gpus}
    if isinstance(report, TfLogReport):
        return {
            device.index: None if device.total_memory_bytes is None else bytes_to_mib(device.total_memory_bytes)
            for device in report.devices
        }
    raise TypeError(f"expected an NvidiaSmiReport or TfLogReport, got {type(report).__name__}")
