"""The DRA driver's policy: where a variant of the driver could differ, with this
project's answers (docs/dra.md).

Four seams: whether a prepared container gets the isolation shim, which Xid errors take a
card out of the pool, the memory a card is published with, and the size of the shares a
container is given. The deliberate faults of the test doubles (``gpushare_doubles``)
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

    def critical_xid(self, xid: int) -> bool:
        """Whether an Xid error means the card itself is sick (not one application's bad
        work), so that it leaves the node's pool until the plugin restarts."""
        from gpushare_stack.deviceplugin.xids import APPLICATION_XIDS

        return xid not in APPLICATION_XIDS

    def capacity_gib(self) -> Callable[[GpuCard], int] | None:
        """The memory each card is published with (None: its own, in whole GiB)."""
        return None

    def sized_shares(self, claim: Mapping[str, Any], shares: Sequence[Share]) -> Sequence[Share]:
        """The shares a container is given: what the allocation consumed (the request
        rounded by the device's request policy), as the scheduler wrote it."""
        return shares
