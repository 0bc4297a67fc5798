"""The peer-like stacks deploy and behave as their peers do.

On the peers' one-node kind cluster (tests/peers/conftest.py), switch to each peer
flavor of the reference stack (fixtures/framework/stacks.py: manifests/overlays/peers/*),
run one pod spelled as that peer wants it, and check what the pod got.

- gpushare-like: ``aliyun.com/gpu-mem: 8`` with label ``aliyun.com/gpu-count: "2"`` gets
  ONE card (the label means nothing to gpushare) and no isolation: nvidia-smi shows the
  physical card's total.
- hami-like: ``nvidia.com/gpu: 2`` + ``nvidia.com/gpumem: 4096`` gets 2 distinct cards of
  4096 MiB each in nvidia-smi, and a process sees about 300 MiB of the share taken by
  its own CUDA context, as under HAMi-core.

    .venv/bin/python -m pytest tests/peers -q -p no:cacheprovider
"""

from __future__ import annotations

import uuid

import pytest

from gpushare_conformance.fixtures.framework import podstate
from gpushare_conformance.fixtures.framework.progress import progress_printer
from gpushare_conformance.fixtures.framework.submit import wait_pod
from gpushare_stack import contract

pytestmark = [pytest.mark.e2e, pytest.mark.disruptive]

NAMESPACE = "default"
PHYSICAL_MIB = 16160  # ci/local/inventory-default.yaml: V100-SXM2-16GB
SMI = "nvidia-smi --query-gpu=index,uuid,memory.total --format=csv,noheader,nounits"
PROBE = f"{contract.CONTAINER_NATIVE_DIR}/bin/gpushare-probe --raw"


def run_pod(kube, pytestconfig, name: str, labels: dict, limits: dict, script: str) -> tuple[dict, str]:
    """Run a one-shot pod to completion; its object (annotations) and its log."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "peer-stacks-e2e", **labels}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": contract.MOCK_WORKLOAD_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sh", "-c", script],
                    "resources": {"limits": limits},
                }
            ],
        },
    }
    kube.core.create_namespaced_pod(NAMESPACE, pod)
    try:
        state, obj = wait_pod(
            kube, NAMESPACE, name, want=(podstate.SUCCEEDED,), timeout=180, progress=progress_printer(pytestconfig)
        )
        return obj, kube.pod_log(NAMESPACE, name)
    finally:
        kube.core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)


def smi_rows(log: str) -> list[tuple[int, str, int]]:
    rows = []
    for line in log.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit() and parts[1].startswith("GPU-"):
            rows.append((int(parts[0]), parts[1], int(parts[2])))
    return rows


@pytest.mark.on_stack("gpushare-like")
def test_gpushare_like_puts_8_gib_on_one_card_without_isolation(kube, switch, pytestconfig):
    nodes = switch("gpushare-like")
    node = nodes[0]
    allocatable = node["status"]["allocatable"]
    assert int(allocatable["aliyun.com/gpu-mem"]) == 4 * (PHYSICAL_MIB // 1024)
    assert node["status"]["capacity"].get("aliyun.com/gpu-count") == "4"
    assert "gpushare.conformance.io/cards" not in (node["metadata"].get("annotations") or {})
    name = f"gpushare-like-{uuid.uuid4().hex[:6]}"
    obj, log = run_pod(
        kube,
        pytestconfig,
        name,
        {"aliyun.com/gpu-count": "2"},
        {"aliyun.com/gpu-mem": "8"},
        f"{SMI}; env | grep -E '^(ALIYUN_COM|NVIDIA_VISIBLE|LD_PRELOAD|GPUSHARE_)' | sort",
    )
    annotations = obj["metadata"]["annotations"]
    assert len(annotations["ALIYUN_COM_GPU_MEM_IDX"].split(",")) == 1, annotations
    assert annotations["ALIYUN_COM_GPU_MEM_POD"] == "8"
    assert annotations["ALIYUN_COM_GPU_MEM_ASSIGNED"] == "true"
    assert not [k for k in annotations if k.startswith("scheduler.framework.gpushare")]
    rows = smi_rows(log)
    assert [total for _, _, total in rows] == [PHYSICAL_MIB], log  # one card, its physical total
    # No shim and no limits (GPUSHARE_MOCK_INVENTORY is the mock node's, set by its runtime).
    assert "ALIYUN_COM_GPU_MEM_CONTAINER=8" in log and "LD_PRELOAD" not in log, log
    assert "GPUSHARE_MEMORY_LIMIT" not in log, log


@pytest.mark.on_stack("hami-like")
def test_hami_like_gives_2_cards_of_4096_mib_with_the_context_charged(kube, switch, pytestconfig):
    nodes = switch("hami-like")
    node = nodes[0]
    assert int(node["status"]["allocatable"]["nvidia.com/gpu"]) == 4 * 10
    assert "hami.io/node-nvidia-register" in node["metadata"]["annotations"]
    name = f"hami-like-{uuid.uuid4().hex[:6]}"
    obj, log = run_pod(
        kube,
        pytestconfig,
        name,
        {},
        {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "4096"},
        f"{SMI}; {PROBE}",
    )
    annotations = obj["metadata"]["annotations"]
    assert annotations["hami.io/bind-phase"] == "success", annotations
    allocated = [d.split(",")[0] for d in annotations["hami.io/vgpu-devices-allocated"].split(";")[0].split(":") if d]
    assert len(set(allocated)) == 2, annotations
    rows = smi_rows(log)
    assert [total for _, _, total in rows] == [4096, 4096], log
    assert sorted(uuid_ for _, uuid_, _ in rows) == sorted(allocated), log
    free = [int(f.split("=")[1]) // (1 << 20) for f in log.split() if f.startswith("free_bytes=")]
    assert free == [4096 - 300, 4096 - 300], log
