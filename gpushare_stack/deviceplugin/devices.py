"""Device IDs the plugin advertises to the kubelet, and the card each one encodes.

``aliyun.com/gpu-mem``: one device per GiB per card, ``<uuid>-_-<k>`` (the open
gpushare form; at most 40 + 3 + 4 characters, under the kubelet's 63). The kubelet
picks *which* GiB devices it hands a container, so Allocate only trusts their number;
the cards come from the extender's annotations.
``aliyun.com/gpu-count``: one device per card, its UUID.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpushare_stack import contract
from gpushare_stack.deviceplugin.discovery import GpuCard

SEPARATOR = "-_-"


@dataclass(frozen=True)
class Device:
    id: str
    healthy: bool

    @property
    def health(self) -> str:
        return contract.HEALTHY if self.healthy else contract.UNHEALTHY


def mem_devices(cards: list[GpuCard], healthy: dict[str, bool]) -> list[Device]:
    return [Device(f"{c.uuid}{SEPARATOR}{k}", healthy.get(c.uuid, True)) for c in cards for k in range(c.memory_gib)]


def count_devices(cards: list[GpuCard], healthy: dict[str, bool]) -> list[Device]:
    return [Device(c.uuid, healthy.get(c.uuid, True)) for c in cards]


def card_uuid(device_id: str) -> str:
    """The card a gpu-mem device ID belongs to."""
    uuid, sep, k = device_id.rpartition(SEPARATOR)
    if not sep or not uuid or not k.isdigit():
        raise ValueError(f"gpushare: device ID {device_id!r} is not of the form <uuid>{SEPARATOR}<k>")
    return uuid
