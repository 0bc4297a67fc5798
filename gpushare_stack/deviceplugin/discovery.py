"""Cards seen through NVML (pynvml): the real driver, or the mock in GPU-less mode."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import pynvml

MIB = 1024 * 1024

log = logging.getLogger(__name__)


class DiscoveryError(RuntimeError):
    """NVML could not be initialised or queried (message carries NVML's error)."""


@dataclass(frozen=True)
class GpuCard:
    """A physical card: ``memory_gib`` = floor(memory_mib / 1024), the unit advertised."""

    index: int
    uuid: str
    name: str
    memory_mib: int

    @property
    def memory_gib(self) -> int:
        return self.memory_mib // 1024


def _card(handle: object) -> GpuCard:
    name = pynvml.nvmlDeviceGetName(handle)
    uuid = pynvml.nvmlDeviceGetUUID(handle)
    memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
    return GpuCard(
        index=pynvml.nvmlDeviceGetIndex(handle),
        uuid=uuid.decode() if isinstance(uuid, bytes) else uuid,
        name=name.decode() if isinstance(name, bytes) else name,
        memory_mib=int(memory.total) // MIB,
    )


def discover() -> list[GpuCard]:
    """Every card NVML reports now. Initialises and shuts NVML down each call, so a
    changed inventory (or a card that fell off the bus) shows on the next poll. A card
    NVML cannot reach (``GPU is lost`` and the like) is left out, the others kept."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise DiscoveryError(f"gpushare: nvmlInit failed: {exc}") from None
    try:
        cards = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            try:
                cards.append(_card(pynvml.nvmlDeviceGetHandleByIndex(i)))
            except pynvml.NVMLError as exc:
                log.warning("card %d: %s; left out", i, exc)
        return cards
    except pynvml.NVMLError as exc:
        raise DiscoveryError(f"gpushare: NVML query failed: {exc}") from None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def node_cards_annotation(cards: list[GpuCard], healthy: dict[str, bool]) -> str:
    """Value of the ``gpushare.conformance.io/cards`` node annotation."""
    return json.dumps(
        [
            {
                "index": c.index,
                "uuid": c.uuid,
                "memory_mib": c.memory_mib,
                "memory_gib": c.memory_gib,
                "healthy": healthy.get(c.uuid, True),
            }
            for c in cards
        ],
        separators=(",", ":"),
    )
