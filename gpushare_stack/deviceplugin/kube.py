"""The device plugin's API calls, through the official ``kubernetes`` client."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from gpushare_stack import contract
from gpushare_stack.kubeclient import MERGE_PATCH


class KubeAccess:
    """Pending pods of a node, the assigned flag, and the node's card annotation."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)

    def pending_pods(self, node: str) -> list[dict[str, Any]]:
        resp = self.core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={node},status.phase=Pending", _preload_content=False
        )
        return json.loads(resp.data).get("items") or []

    def pod_uids(self, node: str) -> list[str]:
        """The uids of every pod bound to ``node``, whatever its phase."""
        resp = self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}", _preload_content=False)
        return [str((p.get("metadata") or {}).get("uid", "")) for p in json.loads(resp.data).get("items") or []]

    def mark_assigned(self, namespace: str, name: str, annotations: dict[str, str] | None = None) -> None:
        """Flip the pod's assigned annotations (default: the open and ACK's forms)."""
        if annotations is None:
            annotations = {contract.ANN_ASSIGNED: "true", contract.ANN_ACK_ASSIGNED: "true"}
        self.patch_pod_annotations(namespace, name, annotations)

    def patch_pod_annotations(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self.core.patch_namespaced_pod(
            name, namespace, {"metadata": {"annotations": annotations}}, _content_type=MERGE_PATCH
        )

    def patch_node_capacity(self, node: str, capacity: dict[str, str]) -> None:
        """Advertise extended resources by patching node status (as the open gpushare
        device plugin does for aliyun.com/gpu-count); the kubelet copies capacity to
        allocatable for resources no device plugin of its own manages."""
        self.core.patch_node_status(
            node, {"status": {"capacity": capacity, "allocatable": capacity}}, _content_type=MERGE_PATCH
        )

    def annotate_node(self, node: str, key: str, value: str) -> None:
        self.core.patch_node(node, {"metadata": {"annotations": {key: value}}}, _content_type=MERGE_PATCH)
