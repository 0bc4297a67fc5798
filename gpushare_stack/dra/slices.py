"""The ResourceSlice a node publishes: one device per healthy card, shared by memory.

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


def resource_slice(
    node: str,
    cards: Iterable[GpuCard],
    generation: int,
    driver: str = DRIVER,
    capacity_gib: Callable[[GpuCard], int] | None = None,
) -> dict[str, Any]:
    """The node's one slice (pool = the node's name). Cards under 1 GiB cannot take a
    share and are left out; ``generation`` goes up whenever the devices change."""
    devices = [
        device(c, capacity_gib(c) if capacity_gib else None)
        for c in sorted(cards, key=lambda c: c.index)
        if c.memory_gib >= STEP_GIB
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(node, driver)},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def slice_name(node: str, driver: str = DRIVER) -> str:
    """A name unique per node and driver, within the 253 characters of a name."""
    return f"{node}-{driver}"[:253]


def device_class(driver: str = DRIVER, name: str = DEVICE_CLASS) -> dict[str, Any]:
    """The DeviceClass claims name: every device of the driver."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]},
    }
