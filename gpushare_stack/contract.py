"""Names shared by the extender, the device plugin and the suite (docs/design.md).

Each name here is part of a contract between parts; change docs/design.md first.
"""

from __future__ import annotations

# The stack's own behaviour, as ``--flavor`` names it (gpushare_stack/variants.py).
REFERENCE_FLAVOR = "reference"

# Extended resources and the pod label.
RESOURCE_MEM = "aliyun.com/gpu-mem"  # GiB, all cards of a node
RESOURCE_COUNT = "aliyun.com/gpu-count"  # cards of a node
LABEL_COUNT = "aliyun.com/gpu-count"  # pod label "M" (absent = 1)
NODE_LABEL = "gpushare"  # gpushare=true selects device-plugin nodes
NODE_LABEL_VALUE = "true"

# Node annotation written by the device plugin: JSON list of cards.
NODE_CARDS_ANNOTATION = "gpushare.conformance.io/cards"

# Pod annotations written by the extender at bind (open gpushare form).
ANN_IDX = "ALIYUN_COM_GPU_MEM_IDX"
ANN_POD = "ALIYUN_COM_GPU_MEM_POD"
ANN_ASSUME_TIME = "ALIYUN_COM_GPU_MEM_ASSUME_TIME"
ANN_ASSIGNED = "ALIYUN_COM_GPU_MEM_ASSIGNED"
# ACK's form.
ANN_ACK_ALLOCATION = "scheduler.framework.gpushare.allocation"
ANN_ACK_ASSIGNED = "scheduler.framework.gpushare.assigned"
ANN_ACK_ASSUME_TIME = "scheduler.framework.gpushare.assume-time"

# Container environment set by the device plugin.
ENV_VISIBLE = "NVIDIA_VISIBLE_DEVICES"
ENV_LIMIT_PREFIX = "GPUSHARE_MEMORY_LIMIT_"
ENV_LIMIT_ALL = "GPUSHARE_MEMORY_LIMIT"
ENV_USAGE_FILE = "GPUSHARE_USAGE_FILE"
ENV_SHIM_FAULT = "GPUSHARE_SHIM_FAULT"  # read only by the fault build of the shim
ENV_IDX = "ALIYUN_COM_GPU_MEM_IDX"
ENV_POD = "ALIYUN_COM_GPU_MEM_POD"
ENV_CONTAINER = "ALIYUN_COM_GPU_MEM_CONTAINER"
ENV_DEV = "ALIYUN_COM_GPU_MEM_DEV"
ENV_LD_PRELOAD = "LD_PRELOAD"
ENV_LD_LIBRARY_PATH = "LD_LIBRARY_PATH"
ENV_MOCK_INVENTORY = "GPUSHARE_MOCK_INVENTORY"

# Paths.
HOST_NATIVE_DIR = "/var/lib/gpushare/native"
CONTAINER_NATIVE_DIR = "/usr/local/gpushare"
SHIM_PATH = f"{CONTAINER_NATIVE_DIR}/lib/libgpushare-shim.so"
# The fault build of the shim (reads GPUSHARE_SHIM_FAULT): only under the plugin's --fault.
SHIM_FAULTS_PATH = f"{CONTAINER_NATIVE_DIR}/lib/libgpushare-shim-faults.so"
# Per-container files (deviceplugin/container_files.py): on the node, and in the container.
HOST_CONTAINERS_DIR = "/var/lib/gpushare/containers"
CONTAINER_LIMITS_FILE = "/etc/gpushare/limits"  # the shim reads it before (and instead of) its env
CONTAINER_PRELOAD_FILE = "/etc/ld.so.preload"
CONTAINER_RUN_DIR = "/run/gpushare"
CONTAINER_USAGE_FILE = f"{CONTAINER_RUN_DIR}/usage"
MOCK_LIB_DIR = f"{CONTAINER_NATIVE_DIR}/mock-lib"
MOCK_INVENTORY_PATH = "/etc/gpushare/inventory.yaml"
NVIDIA_SMI_PATH = "/usr/bin/nvidia-smi"
IMAGE_NATIVE_DIR = "/opt/gpushare/native"

# Kubelet device-plugin API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/constants.go).
DEVICE_PLUGIN_API_VERSION = "v1beta1"
DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
KUBELET_SOCKET_NAME = "kubelet.sock"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"

# Extender.
EXTENDER_PORT = 32766
EXTENDER_PREFIX = "/gpushare-scheduler"
MAX_EXTENDER_PRIORITY = 10  # k8s.io/kube-scheduler/extender/v1 MaxExtenderPriority

# Images.
STACK_IMAGE = "localhost/gpushare-conformance/stack:dev"
MOCK_WORKLOAD_IMAGE = "localhost/gpushare-conformance/tf-mnist-mock:dev"
NAMESPACE = "gpushare-system"
