"""The stack's accounts write only what is theirs (manifests/stack/admission-policy.yaml),
checked with real tokens on the local cluster.

The device plugin (policy gpushare-device-plugin-own-node) writes only its own node.
Its ClusterRole may patch every node and pod (RBAC cannot name "my node"); the policy
reads the node from the service account token the kubelet bound to the plugin's pod.
A PATCH with the plugin pod's own token on its node goes through; the same account's
token made by `kubectl create token` (bound to no pod, so to no node) is refused, and
so is the pod's token on a pod bound to no node. Requests go straight to the API
server with only the bearer token (no client certificate), as a stolen token would.

The extender (policy gpushare-extender-gpu-pods-only) writes only pods asking
aliyun.com/gpu-mem that are not bound yet: its token patches such a pod, and is refused
on a pod that asks no GPU memory.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request

import pytest
import yaml

pytestmark = [pytest.mark.e2e]

NAMESPACE = "gpushare-system"
ACCOUNT = "gpushare-device-plugin"
POLICY = "gpushare-device-plugin-own-node"
ANNOTATION = "gpushare.conformance.io/own-node-test"


def _server_and_ca(kubeconfig) -> tuple[str, str]:
    config = yaml.safe_load(open(kubeconfig, encoding="utf-8"))
    cluster = config["clusters"][0]["cluster"]
    return cluster["server"], cluster["certificate-authority"]


def _patch(server: str, ca: str, token: str, path: str, annotation: str | None) -> tuple[int, str]:
    body = json.dumps({"metadata": {"annotations": {ANNOTATION: annotation}}}).encode()
    request = urllib.request.Request(
        f"{server}{path}",
        data=body,
        method="PATCH",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/merge-patch+json"},
    )
    try:
        with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=ca), timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_device_plugin_writes_only_its_own_node_and_its_pods(cluster, suite) -> None:
    if cluster.provider != "local":
        pytest.skip("reads the local cluster's kubeconfig and CA")
    kube, node = suite.kube, suite.node.node
    server, ca = _server_and_ca(cluster.kubeconfig)
    plugins = [
        p
        for p in kube.core.list_namespaced_pod(NAMESPACE, label_selector="app=gpushare-device-plugin").items
        if p.spec.node_name == node
    ]
    assert plugins, f"no device plugin pod on {node}"
    pod_token = kube.kubectl(
        "exec", "-n", NAMESPACE, plugins[0].metadata.name, "-c", "device-plugin", "--",
        "cat", "/var/run/secrets/kubernetes.io/serviceaccount/token",
    ).strip()  # fmt: skip
    loose_token = kube.kubectl("create", "token", ACCOUNT, "-n", NAMESPACE).strip()
    node_path = f"/api/v1/nodes/{node}"
    try:
        status, body = _patch(server, ca, pod_token, node_path, "1")
        assert status == 200, (status, body[:500])
        status, body = _patch(server, ca, loose_token, node_path, "2")
        assert status == 403 and POLICY in body and "its token is of node (none)" in body, (status, body[:500])
    finally:
        _patch(server, ca, pod_token, node_path, None)

    pending = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "nowhere", "labels": {"gpushare.conformance.io/suite": "true"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "gpushare-no-such-node"},
            "containers": [{"name": "c", "image": suite.suite_image, "command": ["true"]}],
        },
    }
    kube.core.create_namespaced_pod(suite.namespace, pending)
    status, body = _patch(server, ca, pod_token, f"/api/v1/namespaces/{suite.namespace}/pods/nowhere", "1")
    assert status == 403 and POLICY in body and "is on no node" in body, (status, body[:500])


def _pending_pod(name: str, image: str, gpu_mem: int | None) -> dict:
    container = {"name": "c", "image": image, "command": ["true"]}
    if gpu_mem is not None:
        container["resources"] = {"limits": {"aliyun.com/gpu-mem": str(gpu_mem)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"gpushare.conformance.io/suite": "true"}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "gpushare-no-such-node"}, "containers": [container]},
    }


def test_the_extender_writes_only_gpu_pods_it_has_not_bound(cluster, suite) -> None:
    if cluster.provider != "local":
        pytest.skip("reads the local cluster's kubeconfig and CA")
    kube = suite.kube
    server, ca = _server_and_ca(cluster.kubeconfig)
    token = kube.kubectl("create", "token", "gpushare-extender", "-n", NAMESPACE).strip()
    kube.core.create_namespaced_pod(suite.namespace, _pending_pod("gpu-pending", suite.suite_image, 2))
    kube.core.create_namespaced_pod(suite.namespace, _pending_pod("plain-pending", suite.suite_image, None))
    pods = f"/api/v1/namespaces/{suite.namespace}/pods"
    status, body = _patch(server, ca, token, f"{pods}/gpu-pending", "1")
    assert status == 200, (status, body[:500])
    status, body = _patch(server, ca, token, f"{pods}/plain-pending", "1")
    assert status == 403 and "gpushare-extender-gpu-pods-only" in body, (status, body[:500])
    assert "asks no aliyun.com/gpu-mem" in body, body[:500]
