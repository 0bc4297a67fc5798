"""Keep the node's ResourceSlice equal to its cards (``slices.resource_slice``).

The kubelet deletes a node's slices when it starts and 30 s after a driver stops
answering, and cards come and go (a card lost from the bus leaves the slice), so the
driver publishes again on every registration and on a timer: ``publish`` creates the
slice if it is missing, replaces it when its devices differ (with the pool's
generation one higher, as the API asks of any change) and leaves it alone otherwise.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from kubernetes.client.exceptions import ApiException

from gpushare_stack.deviceplugin.discovery import GpuCard
from gpushare_stack.dra.slices import DRIVER, resource_slice, slice_name

log = logging.getLogger(__name__)

CREATED, UPDATED, UNCHANGED = "created", "updated", "unchanged"


class SliceApi(Protocol):
    """The three calls of ``kubernetes.client.ResourceV1Api`` the publisher makes."""

    def read_resource_slice(self, name: str, **kwargs: Any) -> Any: ...
    def create_resource_slice(self, body: dict[str, Any], **kwargs: Any) -> Any: ...
    def replace_resource_slice(self, name: str, body: dict[str, Any], **kwargs: Any) -> Any: ...


class SlicePublisher:
    def __init__(
        self, api: SliceApi, node: str, driver: str = DRIVER, capacity_gib: Callable[[GpuCard], int] | None = None
    ) -> None:
        self.api = api
        self.node = node
        self.driver = driver
        self.capacity_gib = capacity_gib  # only a fault publishes other than the card's size
        self.generation = 0  # the pool generation last written

    def _current(self) -> dict[str, Any] | None:
        try:
            response = self.api.read_resource_slice(slice_name(self.node, self.driver), _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return json.loads(response.data)

    def publish(self, cards: Iterable[GpuCard]) -> str:
        """Make the slice match ``cards``; returns what it did."""
        cards = list(cards)
        current = self._current()
        if current is not None:
            spec = current.get("spec") or {}
            self.generation = max(self.generation, int((spec.get("pool") or {}).get("generation") or 0))
            wanted = resource_slice(self.node, cards, self.generation, self.driver, self.capacity_gib)
            if spec.get("devices") == wanted["spec"]["devices"] and spec.get("nodeName") == self.node:
                return UNCHANGED
            self.generation += 1
            wanted = resource_slice(self.node, cards, self.generation, self.driver, self.capacity_gib)
            wanted["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
            self.api.replace_resource_slice(wanted["metadata"]["name"], wanted)
            log.info("slice %s: devices changed, generation %d", wanted["metadata"]["name"], self.generation)
            return UPDATED
        self.generation += 1
        wanted = resource_slice(self.node, cards, self.generation, self.driver, self.capacity_gib)
        self.api.create_resource_slice(wanted)
        log.info("slice %s: created, generation %d", wanted["metadata"]["name"], self.generation)
        return CREATED
