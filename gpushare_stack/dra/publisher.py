"""Keep the node's ResourceSlices equal to its cards (``slices.resource_slices``).

The kubelet deletes a node's slices when it starts and 30 s after a driver stops
answering, and cards come and go (a card lost from the bus leaves the pool), so the
driver publishes again on a timer (``--publish-interval``, 10 s): ``publish`` reads the
node's slices of the driver and, when their devices differ from the cards (or one is
missing), writes every slice with the pool's generation one higher (as the API asks of
any change) and deletes the slices of cards that are gone; otherwise it leaves them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from kubernetes.client.exceptions import ApiException

from gpushare_stack.deviceplugin.discovery import GpuCard
from gpushare_stack.dra.slices import DRIVER, resource_slices

log = logging.getLogger(__name__)

CREATED, UPDATED, UNCHANGED = "created", "updated", "unchanged"


class SliceApi(Protocol):
    """The calls of ``kubernetes.client.ResourceV1Api`` the publisher makes."""

    def list_resource_slice(self, **kwargs: Any) -> Any: ...
    def create_resource_slice(self, body: dict[str, Any], **kwargs: Any) -> Any: ...
    def replace_resource_slice(self, name: str, body: dict[str, Any], **kwargs: Any) -> Any: ...
    def delete_resource_slice(self, name: str, **kwargs: Any) -> Any: ...


class SlicePublisher:
    def __init__(
        self, api: SliceApi, node: str, driver: str = DRIVER, capacity_gib: Callable[[GpuCard], int] | None = None
    ) -> None:
        self.api = api
        self.node = node
        self.driver = driver
        self.capacity_gib = capacity_gib  # only a fault publishes other than the card's size
        self.generation = 0  # the pool generation last written

    def _current(self) -> dict[str, dict[str, Any]]:
        """The node's slices of this driver, by name."""
        selector = f"spec.nodeName={self.node},spec.driver={self.driver}"
        response = self.api.list_resource_slice(field_selector=selector, _preload_content=False)
        return {s["metadata"]["name"]: s for s in json.loads(response.data).get("items") or []}

    def _wanted(self, cards: list[GpuCard]) -> dict[str, dict[str, Any]]:
        wanted = resource_slices(self.node, cards, self.generation, self.driver, self.capacity_gib)
        return {s["metadata"]["name"]: s for s in wanted}

    def publish(self, cards: Iterable[GpuCard]) -> str:
        """Make the node's slices match ``cards``; returns what it did."""
        cards = list(cards)
        current = self._current()
        for existing in current.values():
            pool = (existing.get("spec") or {}).get("pool") or {}
            self.generation = max(self.generation, int(pool.get("generation") or 0))
        wanted = self._wanted(cards)
        if current and set(current) == set(wanted):
            same = all(
                (current[name].get("spec") or {}).get("devices") == body["spec"]["devices"]
                and ((current[name].get("spec") or {}).get("pool") or {}) == body["spec"]["pool"]
                for name, body in wanted.items()
            )
            if same:
                return UNCHANGED
        self.generation += 1
        wanted = self._wanted(cards)
        for name, body in wanted.items():
            if name in current:
                body["metadata"]["resourceVersion"] = current[name]["metadata"].get("resourceVersion")
                self.api.replace_resource_slice(name, body)
            else:
                self.api.create_resource_slice(body)
        for name in sorted(set(current) - set(wanted)):
            try:
                self.api.delete_resource_slice(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        what = UPDATED if current else CREATED
        log.info("node %s: %d slice(s) %s, generation %d", self.node, len(wanted), what, self.generation)
        return what
