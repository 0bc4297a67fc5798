"""The seed's request spelled for Dynamic Resource Allocation (docs/dra.md).

"N GiB over M cards of one node" becomes a ResourceClaimTemplate with M requests of
one device each (``gpu-0`` .. ``gpu-<M-1>``), every one asking N/M of the device
class's memory capacity, and one ``distinctAttribute`` constraint on the cards'
unique attribute so the M shares land on M different cards. M requests of one device,
not one request of M: a shareable device may be picked again within one request, and
Kubernetes 1.34's distinctAttribute compares a device only with the last one of its
own request. The API takes any quantity, so a share that is not a whole GiB is spelled
exactly (``1536Mi``) and the stack's request policy decides what it consumes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIB = 1 << 20
GIB = 1 << 30
CLAIM_REFERENCE = "gpus"


class DraRequestError(ValueError):
    """A request the DRA spelling cannot express (the message names the value)."""


@dataclass(frozen=True)
class DraSpelling:
    """How a DRA stack names what the seed asks: its device class, the capacity that
    holds a card's memory, and the attribute that tells cards apart."""

    device_class: str
    distinct_attribute: str  # fully qualified: <driver domain>/<attribute>
    capacity: str = "memory"
    # The driver publishing the class's devices (spec.driver of its slices); default:
    # the distinct attribute's domain, as drivers name their own attributes.
    driver: str = ""

    def __post_init__(self) -> None:
        if self.driver == "" and isinstance(self.distinct_attribute, str):
            object.__setattr__(self, "driver", self.distinct_attribute.partition("/")[0])
        for field_name in ("device_class", "distinct_attribute", "capacity", "driver"):
            value = getattr(self, field_name)
            if not isinstance(value, str) or not value.strip():
                raise DraRequestError(f"DRA {field_name.replace('_', ' ')} must be a non-empty name, got {value!r}")
        domain, slash, attribute = self.distinct_attribute.partition("/")
        if not slash or not domain or not attribute:
            raise DraRequestError(
                f"DRA distinct attribute must be <domain>/<name> (e.g. gpu.nvidia.com/uuid), "
                f"got {self.distinct_attribute!r}"
            )

    @property
    def attribute_name(self) -> str:
        """The distinct attribute as a slice of the driver's own domain spells it."""
        domain, _, name = self.distinct_attribute.partition("/")
        return name if domain == self.driver else self.distinct_attribute


def per_card_quantity(total_gib: int, cards: int) -> str:
    """N/M GiB as a Quantity: whole GiB as ``4Gi``, else whole MiB (``1536Mi``), else bytes."""
    if isinstance(total_gib, bool) or not isinstance(total_gib, int) or total_gib < 1:
        raise DraRequestError(f"total_gib must be a positive integer, got {total_gib!r}")
    if isinstance(cards, bool) or not isinstance(cards, int) or cards < 1:
        raise DraRequestError(f"cards must be a positive integer, got {cards!r}")
    size = total_gib * GIB
    if size % cards == 0 and (size // cards) % GIB == 0:
        return f"{size // cards // GIB}Gi"
    if size % cards == 0 and (size // cards) % MIB == 0:
        return f"{size // cards // MIB}Mi"
    return str(-(-size // cards))  # bytes, rounded up: never less than N/M


def request_names(cards: int) -> list[str]:
    return [f"gpu-{i}" for i in range(cards)]


def claim_template(name: str, total_gib: int, cards: int | None, spelling: DraSpelling) -> dict[str, Any]:
    """The ResourceClaimTemplate asking ``total_gib`` over ``cards`` cards (None: one card)."""
    count = cards or 1
    share = per_card_quantity(total_gib, count)
    requests = [
        {
            "name": request,
            "exactly": {
                "deviceClassName": spelling.device_class,
                "allocationMode": "ExactCount",
                "count": 1,
                "capacity": {"requests": {spelling.capacity: share}},
            },
        }
        for request in request_names(count)
    ]
    devices: dict[str, Any] = {"requests": requests}
    if count > 1:
        devices["constraints"] = [{"requests": request_names(count), "distinctAttribute": spelling.distinct_attribute}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": devices}},
    }


def use_claim_template(pod_spec: dict[str, Any], template: str, container_index: int = 0) -> None:
    """Make the pod's container ``container_index`` use a claim made from ``template``."""
    containers = pod_spec.get("containers") or []
    if not 0 <= container_index < len(containers):
        raise DraRequestError(f"the pod has {len(containers)} container(s), no container {container_index}")
    claims = [c for c in pod_spec.get("resourceClaims") or [] if c.get("name") != CLAIM_REFERENCE]
    pod_spec["resourceClaims"] = [*claims, {"name": CLAIM_REFERENCE, "resourceClaimTemplateName": template}]
    resources = containers[container_index].setdefault("resources", {})
    refs = [r for r in resources.get("claims") or [] if r.get("name") != CLAIM_REFERENCE]
    resources["claims"] = [*refs, {"name": CLAIM_REFERENCE}]
