"""The kustomize manifests render and say what docs/design.md and the seed say."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpushare_stack import contract

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
KUBECTL = shutil.which("kubectl")


def render(path: str) -> list[dict]:
    if KUBECTL is None:
        pytest.skip("kubectl not installed (needed for `kubectl kustomize`)")
    out = subprocess.run(
        [KUBECTL, "kustomize", str(MANIFESTS / path)], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def by_kind(docs: list[dict], kind: str, name: str) -> dict:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def test_stack_objects_and_least_privilege_rbac():
    docs = render("stack")
    assert render(".") == docs
    assert {
        d["metadata"].get("namespace")
        for d in docs
        if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding")
    } == {"gpushare-system"}
    rules = {
        name: sorted((tuple(r["resources"]), tuple(r["verbs"])) for r in by_kind(docs, "ClusterRole", name)["rules"])
        for name in ("gpushare-extender", "gpushare-device-plugin")
    }
    assert rules["gpushare-extender"] == [
        (("nodes",), ("get", "list", "watch")),
        (("pods",), ("get", "list", "watch", "patch")),
        (("pods/binding",), ("create",)),
    ]
    assert rules["gpushare-device-plugin"] == [
        (("nodes",), ("patch",)),
        (("pods",), ("get", "list", "watch", "patch")),
    ]


def test_extender_deployment_listens_on_host_port():
    docs = render("stack")
    spec = by_kind(docs, "Deployment", "gpushare-extender")["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True
    (container,) = spec["containers"]
    assert container["image"] == contract.STACK_IMAGE and container["imagePullPolicy"] == "IfNotPresent"
    assert container["ports"][0]["containerPort"] == contract.EXTENDER_PORT
    assert container["command"] == ["gpushare-extender"]
    # No Service: the scheduler calls 127.0.0.1, the suite reads inspect through the API
    # server's pod proxy; a Service would offer the verbs to every pod.
    assert not [d for d in docs if d.get("kind") == "Service"]
    security = container["securityContext"]
    assert security["runAsNonRoot"] and security["readOnlyRootFilesystem"]
    assert security["capabilities"] == {"drop": ["ALL"]} and not security["allowPrivilegeEscalation"]
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["resources"]["limits"]["memory"]


def test_only_the_stacks_accounts_may_write_allocation_annotations():
    docs = render("stack")
    policy = by_kind(docs, "ValidatingAdmissionPolicy", "gpushare-allocation-annotations")["spec"]
    text = json.dumps(policy)
    for key in (contract.ANN_IDX, contract.ANN_POD, contract.ANN_ASSUME_TIME, contract.ANN_ASSIGNED):
        assert key in text
    assert "system:serviceaccount:gpushare-system:gpushare-extender" in text
    binding = by_kind(docs, "ValidatingAdmissionPolicyBinding", "gpushare-allocation-annotations")["spec"]
    assert binding == {"policyName": "gpushare-allocation-annotations", "validationActions": ["Deny"]}


def test_device_plugin_daemonset_and_mock_overlay():
    base = by_kind(render("stack"), "DaemonSet", "gpushare-device-plugin")["spec"]["template"]["spec"]
    assert base["nodeSelector"] == {"gpushare": "true"}
    (init,) = base["initContainers"]
    assert "/opt/gpushare/native" in init["command"][-1]
    hostpaths = {v["name"]: v["hostPath"]["path"] for v in base["volumes"]}
    assert hostpaths == {
        "device-plugins": "/var/lib/kubelet/device-plugins",
        "native": "/var/lib/gpushare/native",
        "containers": "/var/lib/gpushare/containers",  # each container's read-only limits files
        "all-cards": "/dev/null",  # its own cards, for a toolkit that reads them from mounts
    }
    for c in (init, *base["containers"]):
        assert c["image"] == contract.STACK_IMAGE and c["imagePullPolicy"] == "IfNotPresent"

    # The driver comes from the node's container toolkit, asked for as NVIDIA's device
    # plugin asks; nothing of the mock is mounted or published.
    (plugin,) = base["containers"]
    env = {e["name"]: e.get("value") for e in plugin["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
    mounts = {m["name"]: (m["mountPath"], m.get("readOnly")) for m in plugin["volumeMounts"]}
    assert mounts["all-cards"] == ("/var/run/nvidia-container-devices/all", True)
    assert "--device-list-strategy=volume-mounts" in plugin["args"]
    assert "mock" not in init["command"][-1]

    # GPU-less nodes run the very same stack: the overlay changes nothing.
    assert render("overlays/mock") == render("stack")


def test_seed_job_is_the_seeds_and_mock_overrides_only_the_image():
    seed_text = (MANIFESTS / "workloads" / "seed-job.yaml").read_text()
    assert (MANIFESTS / "workloads" / "mock" / "seed-job.yaml").read_text() == seed_text
    (seed,) = render("workloads")
    assert seed["metadata"]["name"] == "tensorflow-mnist-multigpu"
    template = seed["spec"]["template"]
    assert template["metadata"]["labels"]["aliyun.com/gpu-count"] == "2"
    (c,) = template["spec"]["containers"]
    assert c["image"] == "registry.cn-beijing.aliyuncs.com/ai-samples/gpushare-sample:tensorflow-1.5"
    assert c["command"] == [
        "python",
        "tensorflow-sample-code/tfjob/docker/mnist/main.py",
        "--max_steps=100000",
        "--data_dir=tensorflow-sample-code/data",
    ]
    assert c["workingDir"] == "/root" and c["resources"]["limits"]["aliyun.com/gpu-mem"] == 8
    assert template["spec"]["restartPolicy"] == "Never"
    (mock,) = render("workloads/mock")
    mc = mock["spec"]["template"]["spec"]["containers"][0]
    assert mc.pop("image") == contract.MOCK_WORKLOAD_IMAGE and mc.pop("imagePullPolicy") == "IfNotPresent"
    c.pop("image")
    assert mock["spec"]["template"]["spec"]["containers"][0] == c
    assert mock["metadata"] == seed["metadata"]


def test_scheduler_config_points_at_the_extender():
    cfg = yaml.safe_load((MANIFESTS / "scheduler" / "scheduler-config.yaml").read_text())
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["clientConnection"]["kubeconfig"] == "__KUBECONFIG__"
    (ext,) = cfg["extenders"]
    assert ext["urlPrefix"] == f"https://127.0.0.1:{contract.EXTENDER_PORT}{contract.EXTENDER_PREFIX}"
    assert ext["enableHTTPS"] is True
    assert ext["tlsConfig"] == {
        "caData": "__EXTENDER_CA_DATA__",
        "certData": "__SCHEDULER_CERT_DATA__",
        "keyData": "__SCHEDULER_KEY_DATA__",
    }
    assert (ext["filterVerb"], ext["prioritizeVerb"], ext["bindVerb"]) == ("filter", "prioritize", "bind")
    assert ext["nodeCacheCapable"] is True and ext["weight"] >= 1
    assert ext["managedResources"] == [{"name": "aliyun.com/gpu-mem", "ignoredByScheduler": True}]
