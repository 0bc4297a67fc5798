"""The DRA driver's policy: where a variant of the driver could differ, with this
project's answers (docs/dra.md).

Two seams: whether a prepared container gets the isolation shim, and the memory a card
is published with. The deliberate faults of the test doubles (``gpushare_doubles``)
subclass ``ReferenceDraDriver``; the driver never imports them (``gpushare_stack/variants.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from gpushare_stack.deviceplugin.discovery import GpuCard


class ReferenceDraDriver:
    """Every container isolated; every card published with its own memory."""

    isolation = True  # False: claims prepared without the shim and its limits

    def capacity_gib(self) -> Callable[[GpuCard], int] | None:
        """The memory each card is published with (None: its own, in whole GiB)."""
        return None
