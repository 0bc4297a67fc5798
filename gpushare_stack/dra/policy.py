"""The DRA driver's policy: where a variant of the driver could differ, with this
project's answers (docs/dra.md).

Three seams: whether a prepared container gets the isolation shim, the memory a card is
published with, and the size of the shares a container is given. The deliberate faults of the test doubles (``gpushare_doubles``)
subclass ``ReferenceDraDriver``; the driver never imports them (``gpushare_stack/variants.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpushare_stack.deviceplugin.discovery import GpuCard
from gpushare_stack.dra.shares import Share


class ReferenceDraDriver:
    """Every container isolated; every card published with its own memory."""

    isolation = True  # False: claims prepared without the shim and its limits

    def capacity_gib(self) -> Callable[[GpuCard], int] | None:
        """The memory each card is published with (None: its own, in whole GiB)."""
        return None

    def sized_shares(self, claim: Mapping[str, Any], shares: Sequence[Share]) -> Sequence[Share]:
        """The shares a container is given: what the allocation consumed (the request
        rounded by the device's request policy), as the scheduler wrote it."""
        return shares
