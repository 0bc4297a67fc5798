"""What a prepared claim gives its pod: the shares of cards its allocation consumed.

The scheduler writes a claim's allocation (``status.allocation.devices.results``): per
request the driver, pool, device and, for a device that allows multiple allocations,
``consumedCapacity`` (rounded up to the request policy's step) and a ``shareID``. The
kubelet plugin serves only the results of its own driver on its own node, and every
figure it hands on is checked here: a malformed allocation is an error naming the
field and the value, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from gpushare_stack.dra.slices import MEMORY

GIB = 1 << 30
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_FACTORS = {
    None: 1,
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "Pi": 1 << 50,
    "Ei": 1 << 60,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}
_DEVICE = re.compile(r"^gpu-([0-9]+)$")


class ClaimError(ValueError):
    """The claim's allocation cannot be served (the message names the field and value)."""


@dataclass(frozen=True)
class Share:
    """One request's share of one card."""

    request: str
    device: str
    card_index: int
    memory_gib: int
    share_id: str | None


def quantity_bytes(text: str, where: str) -> int:
    """A resource.Quantity as a whole number of bytes (``4Gi``, ``4096Mi``, ``4294967296``)."""
    found = _QUANTITY.match(str(text).strip())
    if found is None:
        raise ClaimError(f"{where}: {text!r} is not a quantity (e.g. 4Gi)")
    try:
        value = Decimal(found.group(1)) * _FACTORS[found.group(2)]
    except InvalidOperation:
        raise ClaimError(f"{where}: {text!r} is not a quantity (e.g. 4Gi)") from None
    if value != value.to_integral_value():
        raise ClaimError(f"{where}: {text!r} is not a whole number of bytes")
    return int(value)


def claim_shares(claim: Mapping[str, Any], driver: str, node: str) -> list[Share]:
    """The shares of ``driver``'s devices the claim was allocated on ``node``, in the
    order of its results."""
    meta = claim.get("metadata") or {}
    name = f"{meta.get('namespace')}/{meta.get('name')}"
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        raise ClaimError(f"claim {name}: status.allocation is empty (the claim is not allocated)")
    results = (allocation.get("devices") or {}).get("results") or []
    shares = []
    for i, result in enumerate(results):
        if result.get("driver") != driver:
            continue
        where = f"claim {name}: status.allocation.devices.results[{i}]"
        request = str(result.get("request") or "")
        if not request:
            raise ClaimError(f"{where}.request is empty")
        if result.get("pool") != node:
            raise ClaimError(f"{where}.pool is {result.get('pool')!r}, not this node {node!r}")
        device = str(result.get("device") or "")
        found = _DEVICE.match(device)
        if found is None:
            raise ClaimError(f"{where}.device is {device!r}, not a card of this driver (gpu-<index>)")
        consumed = (result.get("consumedCapacity") or {}).get(MEMORY)
        if consumed is None:
            raise ClaimError(f"{where}.consumedCapacity.{MEMORY} is missing (a share must say how much it took)")
        size = quantity_bytes(consumed, f"{where}.consumedCapacity.{MEMORY}")
        if size <= 0 or size % GIB:
            raise ClaimError(f"{where}.consumedCapacity.{MEMORY} is {consumed!r}, not a whole number of GiB above 0")
        shares.append(Share(request, device, int(found.group(1)), size // GIB, result.get("shareID")))
    if not shares:
        raise ClaimError(f"claim {name}: no result of driver {driver} in status.allocation.devices.results")
    return shares
