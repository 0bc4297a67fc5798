"""Xid errors through NVML's event API: the driver's word that a card is sick while it
still answers every query. A card with a critical Xid stays sick until the plugin
restarts, as the driver keeps no Xid state a later poll could read back."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

import pynvml

log = logging.getLogger(__name__)

# Xids an application's own work raises (bad memory access, a kernel killed, a
# preempted context...): the card itself is fine.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
# How long one wait lasts before the watcher looks at its stop flag again.
WAIT_MS = 1000


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


class XidWatcher:
    """Waits on one NVML event set for Xid errors of the given cards and reports each
    (card UUID, Xid) to ``on_xid`` from its own thread."""

    def __init__(self, uuids: Iterable[str], on_xid: Callable[[str, int], None], wait_ms: int = WAIT_MS) -> None:
        self.uuids = list(uuids)
        self.on_xid = on_xid
        self.wait_ms = wait_ms
        self.stop = threading.Event()
        self.ready = threading.Event()  # registered (or given up): events from now on are seen

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="xid-events", daemon=True)
        thread.start()
        return thread

    def _register(self, event_set: object) -> int:
        registered = 0
        for uuid in self.uuids:
            try:
                handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
                pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, event_set)
                registered += 1
            except pynvml.NVMLError as exc:  # a lost card, or a driver without Xid events
                log.warning("card %s: cannot watch its Xid errors: %s", uuid, exc)
        return registered

    def run(self) -> None:
        """Register every card, then deliver Xids until ``stop`` is set."""
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            log.error("Xid errors not watched: nvmlInit failed: %s", exc)
            self.ready.set()
            return
        try:
            event_set = pynvml.nvmlEventSetCreate()
            try:
                log.info("watching Xid errors of %d of %d cards", self._register(event_set), len(self.uuids))
                self.ready.set()
                while not self.stop.is_set():
                    try:
                        data = pynvml.nvmlEventSetWait(event_set, self.wait_ms)
                    except pynvml.NVMLError_Timeout:
                        continue
                    if data.eventType & pynvml.nvmlEventTypeXidCriticalError:
                        self.on_xid(_text(pynvml.nvmlDeviceGetUUID(data.device)), int(data.eventData))
            finally:
                pynvml.nvmlEventSetFree(event_set)
        except pynvml.NVMLError as exc:
            log.error("Xid errors no longer watched: %s", exc)
        finally:
            self.ready.set()
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError:
                pass
