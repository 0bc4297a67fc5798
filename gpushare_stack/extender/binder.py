"""Bind: reserve cards, write the pod's annotations, then create the Binding."""

from __future__ import annotations

import json
import logging
from typing import Any

from kubernetes import client

from gpushare_stack.allocation import Allocation
from gpushare_stack.extender.state import BindError, ClusterState
from gpushare_stack.kubeclient import MERGE_PATCH

log = logging.getLogger(__name__)


class Binder:
    """Binds pods through the API server; reservations come from ``state``."""

    def __init__(self, state: ClusterState, api: client.ApiClient) -> None:
        self.state = state
        self.core = client.CoreV1Api(api)

    def _pod(self, namespace: str, name: str, uid: str) -> dict[str, Any]:
        pod = self.state.pod(namespace, name)
        if pod is None or str(pod["metadata"].get("uid")) != uid:
            resp = self.core.read_namespaced_pod(name, namespace, _preload_content=False)
            pod = json.loads(resp.data)
        if str(pod["metadata"].get("uid")) != uid:
            raise BindError(
                f"gpushare: pod {namespace}/{name} has uid {pod['metadata'].get('uid')}, "
                f"the scheduler asked to bind uid {uid}"
            )
        return pod

    def _create_binding(self, namespace: str, name: str, uid: str, node: str) -> None:
        # POST pods/<name>/binding, as kube-scheduler does: RBAC grants only pods/binding.
        self.core.create_namespaced_pod_binding(
            name,
            namespace,
            client.V1Binding(
                metadata=client.V1ObjectMeta(name=name, namespace=namespace, uid=uid),
                target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
            ),
            _preload_content=False,  # the reply is a Status, which the V1Binding model cannot parse
        )

    def bind(self, namespace: str, name: str, uid: str, node: str) -> Allocation | None:
        """Bind the pod; returns its cards (None for a pod asking no gpu-mem)."""
        pod = self._pod(namespace, name, uid)
        if not self.state.flavor.is_share_pod(pod):  # the scheduler binds every pod it sent us through us
            self._create_binding(namespace, name, uid, node)
            return None
        flavor = self.state.flavor
        flavor.lock_node(self.core, pod, node)
        try:
            return self._bind_locked(pod, namespace, name, uid, node)
        finally:
            flavor.bind_finished(node)

    def _bind_locked(self, pod: dict[str, Any], namespace: str, name: str, uid: str, node: str) -> Allocation:
        flavor = self.state.flavor
        try:
            alloc = self.state.assume(pod, node)
        except Exception:
            flavor.unlock_node(self.core, pod, node)
            raise
        flavor.before_writing_bind(f"{namespace}/{name}")
        try:
            annotations = self.state.flavor.bind_annotations(alloc, self.state.cards(node), pod)
            self.core.patch_namespaced_pod(
                name, namespace, {"metadata": {"annotations": annotations}}, _content_type=MERGE_PATCH
            )
            flavor.before_binding(f"{namespace}/{name}")
            self._create_binding(namespace, name, uid, node)
        except Exception:
            self.state.forget(uid)
            flavor.unlock_node(self.core, pod, node)
            raise
        log.info("bound %s/%s to %s cards %s", namespace, name, node, alloc.cards)
        return alloc
