"""Twins bound in the one order the device plugin cannot follow (fault ``twins-at-once``).

A sound extender binds a pod only when no twin of it (a pod on the same node with a
container of the same gpu-mem) still waits for its Allocate. The fault binds at once.
What that costs shows only when the binds land in a certain order, so the fault makes
that order every time rather than leaving it to chance: the twin assumed first, its
cards already written, waits until the next twin of the same node and request is bound,
and is bound right after it. The kubelet then admits the later twin while the earlier
one is bound too and assumed before it, and the device plugin, which serves the oldest
assumed of the pods it cannot tell apart, gives the later twin the earlier twin's cards.
A twin that has no partner within ``wait_s`` is bound alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable

log = logging.getLogger(__name__)


class TwinPairs:
    """Pairs the binds in flight by key (node and request), in the order they were
    assumed; each thread binds one pod."""

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        self._guard = threading.Lock()
        self._open: dict[Hashable, tuple[str, threading.Event]] = {}  # a first twin with no partner yet
        self._mine = threading.local()

    def begin(self, key: Hashable, pod: str) -> None:
        """This thread binds ``pod``, a twin of every pod with the same ``key``."""
        self._mine.key, self._mine.pod, self._mine.slot, self._mine.release = key, pod, None, None

    def assumed(self) -> None:
        """Right after this thread's pod is assumed: it is the first of a new pair, or
        the second of the pair a twin assumed earlier opened."""
        key, pod = getattr(self._mine, "key", None), getattr(self._mine, "pod", "")
        if key is None:
            return
        with self._guard:
            first = self._open.pop(key, None)
            if first is None:
                self._mine.slot = self._open[key] = (pod, threading.Event())
        if first is not None:
            log.warning("FAULT INJECTED: twins-at-once: binding %s before its twin %s, assumed earlier", pod, first[0])
            self._mine.release = first[1]

    def before_binding(self) -> None:
        """The first twin of a pair waits here, its cards written, until its partner is bound."""
        slot = getattr(self._mine, "slot", None)
        if slot is not None and not slot[1].wait(self.wait_s):
            self._close(slot)

    def finished(self) -> None:
        """This thread's bind is over, bound or not: the first twin of its pair goes on."""
        slot, release = getattr(self._mine, "slot", None), getattr(self._mine, "release", None)
        self._mine.key, self._mine.slot, self._mine.release = None, None, None
        if slot is not None:
            self._close(slot)
        if release is not None:
            release.set()

    def _close(self, slot: tuple[str, threading.Event]) -> None:
        """No later twin may pair with this one any more."""
        with self._guard:
            for key, open_slot in list(self._open.items()):
                if open_slot is slot:
                    del self._open[key]
