"""The ResourceSlices a node publishes: one device per healthy card, shared by memory.

resource.k8s.io/v1 with consumable capacity (gate DRAConsumableCapacity): each device
allows multiple allocations and publishes one capacity, ``memory``, the card's whole
GiB (what the device plugin advertises), with a request policy that takes shares in
1 GiB steps from 1 GiB to the whole card. Only ``memory`` is published: a capacity
without a request policy would be consumed whole by every share. Attributes: the
card's NVML UUID (what a claim's distinctAttribute constraint keeps apart), index and
model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from gpushare_stack.deviceplugin.discovery import GpuCard

DRIVER = "gpu.gpushare.conformance.io"
DEVICE_CLASS = "gpu.gpushare.conformance.io"
MEMORY = "memory"
UUID_ATTRIBUTE = "uuid"
STEP_GIB = 1


def device_name(card: GpuCard) -> str:
    """The device's name in the pool (a DNS label): ``gpu-<NVML index>``."""
    return f"gpu-{card.index}"


def device(card: GpuCard, capacity_gib: int | None = None) -> dict[str, Any]:
    """One card as a shareable device (``capacity_gib``: the memory published, default
    the card's whole GiB; only a fault publishes more)."""
    whole = f"{card.memory_gib if capacity_gib is None else capacity_gib}Gi"
    return {
        "name": device_name(card),
        "allowMultipleAllocations": True,
        "attributes": {
            UUID_ATTRIBUTE: {"string": card.uuid},
            "index": {"int": card.index},
            "model": {"string": card.name},
        },
        "capacity": {
            MEMORY: {
                "value": whole,
                "requestPolicy": {
                    "default": f"{STEP_GIB}Gi",
                    "validRange": {"min": f"{STEP_GIB}Gi", "max": whole, "step": f"{STEP_GIB}Gi"},
                },
            }
        },
    }


def resource_slices(
    node: str,
    cards: Iterable[GpuCard],
    generation: int,
    driver: str = DRIVER,
    capacity_gib: Callable[[GpuCard], int] | None = None,
) -> list[dict[str, Any]]:
    """The node's pool (named after the node): one slice per card, each holding that
    card's one device; ``generation`` goes up whenever the devices change. Cards under
    1 GiB cannot take a share and are left out; a node without cards publishes one
    empty slice, so the pool says so.

    One card per slice because kube-scheduler 1.34's allocator, when it commits a
    shared device, checks the capacity of the slice's device at the index of the
    device within the request (always 0 for our requests of one device), not of the
    device it picked: with several cards in one slice, a share picked on card 3 is
    checked against card 0, and a claim that fills every card is refused. In a slice of
    one device the two are the same device.
    """
    devices = [
        device(c, capacity_gib(c) if capacity_gib else None)
        for c in sorted(cards, key=lambda c: c.index)
        if c.memory_gib >= STEP_GIB
    ]
    groups = [[d] for d in devices] or [[]]
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": slice_name(node, driver, group[0]["name"] if group else "none")},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": generation, "resourceSliceCount": len(groups)},
                "devices": group,
            },
        }
        for group in groups
    ]


def slice_name(node: str, driver: str = DRIVER, device_name: str = "none") -> str:
    """A name unique per node, driver and device, within the 253 characters of a name."""
    return f"{node}-{driver}-{device_name}"[-253:].lstrip("-.")


def device_class(driver: str = DRIVER, name: str = DEVICE_CLASS) -> dict[str, Any]:
    """The DeviceClass claims name: every device of the driver."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]},
    }
