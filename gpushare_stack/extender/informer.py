"""Informer-style cache: list then watch nodes and pods, feeding ClusterState.

Objects are kept as the API server's JSON (camelCase keys), the same form the
scheduler sends in ExtenderArgs, so one set of readers serves both.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines

from gpushare_stack.extender.state import ClusterState

log = logging.getLogger(__name__)


class _Expired(Exception):
    """The watch's resourceVersion is too old (HTTP 410): relist."""


class Informer:
    """Two threads (nodes, pods) that keep ``state`` in step with the API server."""

    def __init__(self, state: ClusterState, api: client.ApiClient, watch_timeout_s: int = 300) -> None:
        self.state = state
        self.core = client.CoreV1Api(api)
        self.watch_timeout_s = watch_timeout_s
        self._stop = threading.Event()
        self._synced = {"nodes": threading.Event(), "pods": threading.Event()}

    def start(self) -> None:
        for kind, lister, replace, upsert, remove in (
            (
                "nodes",
                self.core.list_node,
                self.state.replace_nodes,
                self.state.upsert_node,
                lambda o: self.state.remove_node(o["metadata"]["name"]),
            ),
            (
                "pods",
                self.core.list_pod_for_all_namespaces,
                self.state.replace_pods,
                self.state.upsert_pod,
                self.state.remove_pod,
            ),
        ):
            threading.Thread(
                target=self._run,
                args=(kind, lister, replace, upsert, remove),
                name=f"informer-{kind}",
                daemon=True,
            ).start()
        threading.Thread(target=self._mark_synced, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _mark_synced(self) -> None:
        for kind in self.state.flavor.synced_needs:
            self._synced[kind].wait()
        self.state.synced.set()
        log.info("cache synced: state rebuilt from pod annotations")

    def _run(self, kind: str, lister: Callable[..., Any], replace, upsert, remove) -> None:
        while not self._stop.is_set():
            try:
                self.state.flavor.before_listing(kind)
                resp = lister(_preload_content=False)
                body = json.loads(resp.data)
                replace(body.get("items") or [])
                self._synced[kind].set()
                version = body["metadata"]["resourceVersion"]
                while not self._stop.is_set():
                    version = self._watch(lister, version, upsert, remove)
            except _Expired:
                log.info("%s watch expired; relisting", kind)
            except Exception as exc:  # network, API errors: log and relist
                log.warning("%s informer: %s; relisting in 2s", kind, exc)
                time.sleep(2)

    def _watch(self, lister, version: str, upsert, remove) -> str:
        resp = lister(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=self.watch_timeout_s,
            _preload_content=False,
        )
        try:
            for line in iter_resp_lines(resp):
                if not line:
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Expired()
                    raise RuntimeError(f"watch error: {obj.get('reason')}: {obj.get('message')}")
                version = (obj.get("metadata") or {}).get("resourceVersion", version)
                if kind in ("ADDED", "MODIFIED"):
                    upsert(obj)
                elif kind == "DELETED":
                    remove(obj)
                if self._stop.is_set():
                    break
        finally:
            resp.close()
            resp.release_conn()
        return version
