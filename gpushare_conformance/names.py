"""The names the suite speaks: resources, labels, annotations, images, paths.

The suite judges stacks it did not write, so it does not import the reference stack;
this module mirrors ``gpushare_stack/contract.py`` where the two meet (a test keeps
them equal) and adds the suite's own names. Every module of the suite takes a name
from here instead of spelling it.
"""

from __future__ import annotations

import os
from pathlib import Path

# The seed's request, and what the reference stack advertises.
GPU_MEM = "aliyun.com/gpu-mem"  # GiB, total over the pod's cards
GPU_COUNT = "aliyun.com/gpu-count"  # resource (cards of a node) and pod label ("M")
NODE_LABEL = "gpushare"  # gpushare=true marks the nodes the stack serves
NODE_LABEL_VALUE = "true"
NODE_CARDS_ANNOTATION = "gpushare.conformance.io/cards"
STACK_NAMESPACE = "gpushare-system"
EXTENDER_PORT = 32766
# Other stacks' resource names (profiles); stripped before a profile sets its own.
NVIDIA_GPU = "nvidia.com/gpu"
NVIDIA_GPUMEM = "nvidia.com/gpumem"
SHARE_RESOURCES = (GPU_MEM, GPU_COUNT, NVIDIA_GPU, NVIDIA_GPUMEM)
COUNT_LABELS = (GPU_COUNT,)

# Labels the suite puts on what it creates.
SUITE_LABEL = "gpushare.conformance.io/suite"
RUN_LABEL = "gpushare.conformance.io/run-id"

# Images.
SEED_IMAGE = "registry.cn-beijing.aliyuncs.com/ai-samples/gpushare-sample:tensorflow-1.5"
MOCK_WORKLOAD_IMAGE = "localhost/gpushare-conformance/tf-mnist-mock:dev"
STACK_IMAGE = "localhost/gpushare-conformance/stack:dev"
# The suite's own workload image: the pods the checks exec into run it on every stack
# (mock or real driver), so the probe below is there whatever the stack mounts.
SUITE_IMAGE = MOCK_WORKLOAD_IMAGE
# The CUDA driver probe in SUITE_IMAGE (dlopens the libcuda.so.1 the node's runtime gives).
PROBE = "/usr/local/bin/gpushare-probe"
# The hostile workload's attempts (native/src/attack/) and the libraries it brings.
ATTACK = "/usr/local/bin/gpushare-attack"
ATTACK_LIB_DIR = "/usr/local/lib/gpushare-attack"

# What pods see.
OOM_ERROR = "CUDA_ERROR_OUT_OF_MEMORY"
ENV_VISIBLE = "NVIDIA_VISIBLE_DEVICES"


def repo_root() -> Path:
    """The checkout holding manifests/ and ci/ (``GPUSHARE_REPO_ROOT`` overrides it, for
    an installed suite run against a checkout elsewhere)."""
    override = os.environ.get("GPUSHARE_REPO_ROOT")
    return Path(override) if override else Path(__file__).resolve().parents[1]


MANIFESTS = repo_root() / "manifests"
WORKLOADS = MANIFESTS / "workloads"
SEED_JOB = WORKLOADS / "seed-job.yaml"
MOCK_WORKLOADS = WORKLOADS / "mock"
STACK_BASE = MANIFESTS / "stack"
MOCK_OVERLAY = MANIFESTS / "overlays" / "mock"
SCHEDULER_CONFIG = MANIFESTS / "scheduler" / "scheduler-config.yaml"
DEFAULT_INVENTORY = repo_root() / "ci" / "local" / "inventory-default.yaml"
