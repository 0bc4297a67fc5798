"""The peers' flavors of the reference stack (gpushare_doubles/flavors): the extender's
filter and bind decisions, annotations and reasons, and the device plugin's Allocate,
each as the stack it behaves like (open-source gpushare, HAMi) would answer."""

from __future__ import annotations

import json
import uuid as uuidlib
from typing import Any

import pytest
from stack_objects import node, pod

from gpushare_doubles import flavors as peers
from gpushare_doubles import registry
from gpushare_doubles.flavors import hami_like
from gpushare_stack import contract
from gpushare_stack.api import api_pb2
from gpushare_stack.deviceplugin import __main__ as plugin_main
from gpushare_stack.deviceplugin.discovery import GpuCard
from gpushare_stack.deviceplugin.plugin import DevicePlugin
from gpushare_stack.extender import __main__ as extender_main
from gpushare_stack.extender.binder import Binder
from gpushare_stack.extender.state import ClusterState

V100 = 16160
UUIDS = [f"GPU-{i:08d}-0000-0000-0000-000000000000" for i in range(3)]


class Reply:
    def __init__(self, obj: dict[str, Any]) -> None:
        self.data = json.dumps(obj).encode()


class FakeCore:
    """The calls a bind makes, recorded; nodes and pods are kept for the hami-like lock,
    with the API server's resourceVersion precondition on a node patch."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.bindings: list[tuple[str, str, str]] = []
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}

    def read_node(self, name, _preload_content=True):
        if name not in self.nodes:
            self.nodes[name] = {"metadata": {"name": name, "resourceVersion": "1", "annotations": {}}}
        return Reply(self.nodes[name])

    def patch_node(self, name, body, _content_type=None):
        from kubernetes.client.exceptions import ApiException

        meta = self.nodes[name]["metadata"]
        want = body["metadata"].get("resourceVersion")
        if want is not None and want != meta["resourceVersion"]:
            raise ApiException(status=409, reason="Conflict")
        for key, value in body["metadata"].get("annotations", {}).items():
            if value is None:
                meta["annotations"].pop(key, None)
            else:
                meta["annotations"][key] = value
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    def read_namespaced_pod(self, name, namespace, _preload_content=True):
        from kubernetes.client.exceptions import ApiException

        if (namespace, name) not in self.pods:
            raise ApiException(status=404, reason="Not Found")
        return Reply(self.pods[(namespace, name)])

    def patch_namespaced_pod(self, name, namespace, body, _content_type=None):
        self.patches.append((namespace, name, body))
        if (namespace, name) in self.pods:
            self.pods[(namespace, name)]["metadata"]["annotations"].update(body["metadata"]["annotations"])

    def create_namespaced_pod_binding(self, name, namespace, body, _preload_content=True):
        self.bindings.append((namespace, name, body.target.name))
        if (namespace, name) in self.pods:
            self.pods[(namespace, name)]["spec"]["nodeName"] = body.target.name

    def list_pod_for_all_namespaces(self, field_selector="", _preload_content=True):
        node = field_selector.removeprefix("spec.nodeName=")
        return Reply({"items": [p for p in self.pods.values() if (p.get("spec") or {}).get("nodeName") == node]})


def bind(state: ClusterState, p: dict[str, Any], node_name: str, core: FakeCore | None = None) -> dict[str, str]:
    binder = Binder(state, None)
    binder.core = core or FakeCore()
    state.upsert_pod(p)
    binder.bind(p["metadata"]["namespace"], p["metadata"]["name"], p["metadata"]["uid"], node_name)
    assert binder.core.bindings[-1] == (p["metadata"]["namespace"], p["metadata"]["name"], node_name)
    [(_, _, body)] = [patch for patch in binder.core.patches if patch[1] == p["metadata"]["name"]]
    return body["metadata"]["annotations"]


def bound(p: dict[str, Any], node_name: str, annotations: dict[str, str]) -> dict[str, Any]:
    p = json.loads(json.dumps(p))
    p["spec"]["nodeName"] = node_name
    p["metadata"]["annotations"].update(annotations)
    return p


class AbortError(Exception):
    pass


class FakeContext:
    def abort(self, code, details):
        raise AbortError(f"{code.name}: {details}")


class FakeKube:
    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods
        self.node_annotations: dict[str, str] = {}
        self.capacity: dict[str, str] = {}
        self.pod_patches: list[tuple[str, str, dict[str, str]]] = []

    def pending_pods(self, node_name):
        return [p for p in self.pods if p["spec"].get("nodeName") == node_name]

    def mark_assigned(self, namespace, name, annotations=None):
        self.pod_patches.append((namespace, name, dict(annotations or {"default": "both forms"})))

    def patch_pod_annotations(self, namespace, name, annotations):
        self.pod_patches.append((namespace, name, dict(annotations)))
        for p in self.pods:
            if p["metadata"]["name"] == name:
                p["metadata"]["annotations"].update(annotations)

    def annotate_node(self, node_name, key, value):
        self.node_annotations[key] = value

    def release_node_lock(self, node_name, namespace, name):
        self.released = getattr(self, "released", []) + [(node_name, namespace, name)]

    def patch_node_capacity(self, node_name, capacity):
        self.capacity.update(capacity)


def cards(n: int = 3) -> list[GpuCard]:
    return [GpuCard(i, UUIDS[i], "Tesla V100-SXM2-16GB", V100) for i in range(n)]


def plugin_for(flavor: str, kube: FakeKube, n: int = 3) -> DevicePlugin:
    return DevicePlugin(
        "node-1", lambda: cards(n), kube=kube, socket_dir="/nonexistent", flavor=registry.device_plugin(flavor)
    )


def allocate(plugin: DevicePlugin, resource: str, ids: list[str]) -> api_pb2.ContainerAllocateResponse:
    res = next(r for r in plugin.resources if r.resource == resource)
    request = api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=ids)])
    [response] = res.Allocate(request, FakeContext()).container_responses
    return response


# ---- the flags ----------------------------------------------------------------------------
@pytest.mark.parametrize("main", [extender_main, plugin_main])
def test_both_programs_take_a_flavor_with_help(main, capsys):
    parser = main.build_parser()
    assert parser.parse_args(["--node-name=n"] if main is plugin_main else []).flavor == "reference"
    for flavor in peers.FLAVORS:
        assert parser.parse_args(["--flavor", flavor]).flavor == flavor
    with pytest.raises(SystemExit):
        parser.parse_args(["--flavor", "volcano"])
    assert "invalid choice: 'volcano'" in capsys.readouterr().err
    help_text = " ".join(parser.format_help().split())
    for word in ("--flavor", "reference", "gpushare_doubles"):
        assert word in help_text
    flavors_help = " ".join(peers.FLAVOR_HELP.split())  # what each flavor is, beside its code
    for word in ("nvidia.com/gpumem", "label ignored", "no isolation"):
        assert word in flavors_help


# ---- gpushare-like extender -------------------------------------------------------------------
def gpushare_state(*nodes_: dict[str, Any]) -> ClusterState:
    state = ClusterState(flavor=registry.extender(peers.GPUSHARE_LIKE))
    state.replace_nodes(list(nodes_))
    state.replace_pods([])
    state.synced.set()
    return state


def test_gpushare_like_ignores_the_count_label_and_puts_the_pod_on_one_card():
    # the reference annotation is ignored: cards come from capacity (45 GiB over 3 cards)
    state = gpushare_state(node("n1", [15, 15, 15]))
    p = pod("eight", 8, count=2)
    outcome = state.filter(p, ["n1"])
    assert outcome.fits == ["n1"]
    annotations = bind(state, p, "n1")
    assert set(annotations) == {
        "ALIYUN_COM_GPU_MEM_IDX",
        "ALIYUN_COM_GPU_MEM_POD",
        "ALIYUN_COM_GPU_MEM_ASSUME_TIME",
        "ALIYUN_COM_GPU_MEM_ASSIGNED",
    }
    assert annotations["ALIYUN_COM_GPU_MEM_IDX"] == "0"
    assert annotations["ALIYUN_COM_GPU_MEM_POD"] == "8"
    assert annotations["ALIYUN_COM_GPU_MEM_ASSIGNED"] == "false"
    assert state.used("n1") == {0: 8}


def test_gpushare_like_binpacks_onto_the_fullest_card_that_fits():
    state = gpushare_state(node("n1", [15, 15, 15]))
    first = pod("a", 8)
    state.upsert_pod(bound(first, "n1", {"ALIYUN_COM_GPU_MEM_IDX": "1", "ALIYUN_COM_GPU_MEM_POD": "8"}))
    second = pod("b", 6)
    assert bind(state, second, "n1")["ALIYUN_COM_GPU_MEM_IDX"] == "1"  # 7 GiB free on card 1, the least that fits
    third = pod("c", 8)
    assert bind(state, third, "n1")["ALIYUN_COM_GPU_MEM_IDX"] == "0"


def test_gpushare_like_reasons_are_gpushares_words():
    state = gpushare_state(node("n1", [15, 15]), node("bare", []))
    too_big = state.filter(pod("huge", 16), ["n1", "bare"])
    assert too_big.fits == [] and too_big.unresolvable == {}
    assert too_big.failed["n1"] == (
        "Insufficient GPU Memory in one device: aliyun.com/gpu-mem=16 is more than the memory of any device "
        "of node n1 (15 GiB)"
    )
    assert too_big.failed["bare"] == "The node bare is not for GPU share, need skip"
    for name in ("x", "y"):
        state.upsert_pod(
            bound(
                pod(name, 10),
                "n1",
                {"ALIYUN_COM_GPU_MEM_IDX": "0" if name == "x" else "1", "ALIYUN_COM_GPU_MEM_POD": "10"},
            )
        )
    full = state.filter(pod("six", 6), ["n1"])
    assert full.failed == {"n1": "Insufficient GPU Memory in one device: no device of node n1 has 6 GiB free"}
    assert state.filter(pod("five", 5), ["n1"]).fits == ["n1"]


def test_gpushare_like_inspect_is_gpushares_shape():
    state = gpushare_state(node("n1", [15, 15]))
    bind(state, pod("a", 4), "n1")
    [item] = state.inspect()["nodes"]
    assert item["name"] == "n1" and item["totalGPU"] == 30 and item["usedGPU"] == 4
    assert [(d["id"], d["totalGPU"], d["usedGPU"]) for d in item["devs"]] == [(0, 15, 4), (1, 15, 0)]
    assert item["devs"][0]["pods"] == [{"name": "a", "namespace": "default", "usedGPU": 4}]


# ---- gpushare-like device plugin ----------------------------------------------------------------
def test_gpushare_like_plugin_advertises_gpu_mem_and_patches_the_card_count():
    kube = FakeKube([])
    plugin = plugin_for(peers.GPUSHARE_LIKE, kube)
    assert [r.resource for r in plugin.resources] == [contract.RESOURCE_MEM]
    assert len(plugin.resources[0]._devices()) == 45  # one per whole GiB: 3 x 15
    plugin.publish_cards()
    assert kube.node_annotations == {}  # no card annotation: gpushare writes none
    assert kube.capacity == {contract.RESOURCE_COUNT: "3"}


def test_gpushare_like_allocate_gives_the_card_and_no_isolation():
    p = bound(
        pod("eight", 8, count=2),
        "node-1",
        {
            "ALIYUN_COM_GPU_MEM_IDX": "2",
            "ALIYUN_COM_GPU_MEM_POD": "8",
            "ALIYUN_COM_GPU_MEM_ASSUME_TIME": "100",
            "ALIYUN_COM_GPU_MEM_ASSIGNED": "false",
        },
    )
    kube = FakeKube([p])
    plugin = plugin_for(peers.GPUSHARE_LIKE, kube)
    response = allocate(plugin, contract.RESOURCE_MEM, [f"{UUIDS[0]}-_-{k}" for k in range(8)])
    assert dict(response.envs) == {
        "NVIDIA_VISIBLE_DEVICES": "2",
        "ALIYUN_COM_GPU_MEM_IDX": "2",
        "ALIYUN_COM_GPU_MEM_POD": "8",
        "ALIYUN_COM_GPU_MEM_CONTAINER": "8",
        "ALIYUN_COM_GPU_MEM_DEV": "15",
    }
    assert list(response.mounts) == []
    assert kube.pod_patches == [("default", "eight", {"ALIYUN_COM_GPU_MEM_ASSIGNED": "true"})]


def test_reference_plugin_is_unchanged_by_the_flavors():
    p = bound(
        pod("seed", 8, count=2),
        "node-1",
        {
            "ALIYUN_COM_GPU_MEM_IDX": "1,2",
            "ALIYUN_COM_GPU_MEM_POD": "8",
            "ALIYUN_COM_GPU_MEM_ASSUME_TIME": "100",
            "ALIYUN_COM_GPU_MEM_ASSIGNED": "false",
        },
    )
    kube = FakeKube([p])
    plugin = plugin_for(peers.REFERENCE, kube)
    assert [r.resource for r in plugin.resources] == [contract.RESOURCE_MEM, contract.RESOURCE_COUNT]
    env = dict(allocate(plugin, contract.RESOURCE_MEM, [f"{UUIDS[1]}-_-{k}" for k in range(8)]).envs)
    assert env["LD_PRELOAD"] == contract.SHIM_PATH
    assert env["GPUSHARE_MEMORY_LIMIT_0"] == env["GPUSHARE_MEMORY_LIMIT_1"] == "4GiB"
    plugin.publish_cards()
    assert list(kube.node_annotations) == [contract.NODE_CARDS_ANNOTATION] and kube.capacity == {}


@pytest.mark.parametrize("strategy", ["envvar", "volume-mounts"])
def test_the_volume_mounts_strategy_adds_one_dev_null_mount_per_card_in_the_cards_order(strategy):
    p = bound(
        pod("seed", 8, count=2),
        "node-1",
        {
            "ALIYUN_COM_GPU_MEM_IDX": "0,2",
            "ALIYUN_COM_GPU_MEM_POD": "8",
            "ALIYUN_COM_GPU_MEM_ASSUME_TIME": "100",
            "ALIYUN_COM_GPU_MEM_ASSIGNED": "false",
        },
    )
    plugin = DevicePlugin(
        "node-1", lambda: cards(3), kube=FakeKube([p]), socket_dir="/nonexistent", device_list_strategy=strategy
    )
    response = allocate(plugin, contract.RESOURCE_MEM, [f"{UUIDS[2]}-_-{k}" for k in range(8)])
    assert dict(response.envs)["NVIDIA_VISIBLE_DEVICES"] == "0,2"
    listed = [
        (m.container_path, m.host_path, m.read_only)
        for m in response.mounts
        if "nvidia-container-devices" in m.container_path
    ]
    if strategy == "envvar":
        assert listed == []
    else:
        assert listed == [
            ("/var/run/nvidia-container-devices/0", "/dev/null", True),
            ("/var/run/nvidia-container-devices/2", "/dev/null", True),
        ]


def test_an_unknown_device_list_strategy_is_named():
    with pytest.raises(ValueError, match="--device-list-strategy must be one of .*, got 'cdi'"):
        DevicePlugin("node-1", lambda: cards(1), kube=None, socket_dir="/nonexistent", device_list_strategy="cdi")
    parser = plugin_main.build_parser()
    assert parser.parse_args(["--node-name=n"]).device_list_strategy == "envvar"
    assert parser.parse_args(["--node-name=n", "--device-list-strategy=volume-mounts"]).device_list_strategy == (
        "volume-mounts"
    )


# ---- hami-like extender ---------------------------------------------------------------------------
def hami_node(name: str, mibs: list[int], healthy: list[bool] | None = None) -> dict[str, Any]:
    healthy = healthy or [True] * len(mibs)
    gpus = [GpuCard(i, f"GPU-{name}-{i}", "Tesla V100-SXM2-16GB", m) for i, m in enumerate(mibs)]
    register = hami_like.register_annotation(gpus, {g.uuid: h for g, h in zip(gpus, healthy)})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"gpu": "on"}, "annotations": {hami_like.NODE_REGISTER: register}},
        "status": {"capacity": {"nvidia.com/gpu": str(10 * len(mibs))}},
    }


def hami_pod(name: str, gpus: int | list[int], gpumem: int | list[int]) -> dict[str, Any]:
    gpus_ = gpus if isinstance(gpus, list) else [gpus]
    mems = gpumem if isinstance(gpumem, list) else [gpumem] * len(gpus_)
    containers = [
        {
            "name": f"c{i}",
            "image": "x",
            "resources": {"limits": {"nvidia.com/gpu": str(g), "nvidia.com/gpumem": str(m)}},
        }
        for i, (g, m) in enumerate(zip(gpus_, mems))
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": str(uuidlib.uuid4()),
            "labels": {},
            "annotations": {},
        },
        "spec": {"containers": containers, "restartPolicy": "Never"},
        "status": {"phase": "Pending"},
    }


def hami_state(*nodes_: dict[str, Any]) -> ClusterState:
    state = ClusterState(flavor=registry.extender(peers.HAMI_LIKE))
    state.replace_nodes(list(nodes_))
    state.replace_pods([])
    state.synced.set()
    return state


def test_hami_like_register_annotation_is_hamis_json():
    [entry, _] = json.loads(hami_node("n1", [V100, V100])["metadata"]["annotations"][hami_like.NODE_REGISTER])
    assert entry == {
        "id": "GPU-n1-0",
        "index": 0,
        "count": 10,
        "devmem": V100,
        "devcore": 100,
        "type": "NVIDIA-Tesla V100-SXM2-16GB",
        "numa": 0,
        "mode": "hami-core",
        "health": True,
    }
    legacy = "GPU-a,10,16160,100,NVIDIA-Tesla V100,0,true:GPU-b,10,8000,100,NVIDIA-Tesla V100,0,false:"
    read = hami_like.cards_from_register("n", legacy)
    assert [(c.index, c.uuid, c.total_gib, c.healthy) for c in read] == [
        (0, "GPU-a", 16160, True),
        (1, "GPU-b", 8000, False),
    ]


def test_hami_like_places_m_cards_of_x_mib_and_writes_hamis_annotations():
    state = hami_state(hami_node("n1", [V100, V100, V100]))
    p = hami_pod("two", 2, 4096)
    assert state.filter(p, ["n1"]).fits == ["n1"]
    annotations = bind(state, p, "n1")
    assert annotations["hami.io/vgpu-devices-allocated"] == "GPU-n1-0,NVIDIA,4096,0:GPU-n1-1,NVIDIA,4096,0:;"
    assert annotations["hami.io/vgpu-devices-to-allocate"] == annotations["hami.io/vgpu-devices-allocated"]
    assert annotations["hami.io/vgpu-node"] == "n1"
    assert annotations["hami.io/bind-phase"] == "allocating"
    assert annotations["hami.io/bind-time"].isdigit()
    assert not any(k.startswith(("ALIYUN", "scheduler.framework")) for k in annotations)
    assert state.used("n1") == {0: 4096, 1: 4096}
    # a restarted extender rebuilds the usage from the annotations (pods may arrive before nodes)
    again = ClusterState(flavor=registry.extender(peers.HAMI_LIKE))
    again.replace_pods([bound(p, "n1", annotations)])
    assert again.used("n1") == {}
    again.replace_nodes([hami_node("n1", [V100, V100, V100])])
    assert again.used("n1") == {0: 4096, 1: 4096}


def test_hami_like_multi_container_pods_are_encoded_per_container():
    state = hami_state(hami_node("n1", [V100, V100]))
    p = hami_pod("duo", [1, 1], [1000, 2000])
    p["spec"]["containers"].append({"name": "sidecar", "image": "x"})
    annotations = bind(state, p, "n1")
    assert annotations["hami.io/vgpu-devices-allocated"] == "GPU-n1-0,NVIDIA,1000,0:;GPU-n1-0,NVIDIA,2000,0:;;"
    assert hami_like.decode_devices(annotations["hami.io/vgpu-devices-allocated"]) == [
        [("GPU-n1-0", 1000)],
        [("GPU-n1-0", 2000)],
        [],
    ]


def test_hami_like_reasons_name_card_memory_and_card_count():
    state = hami_state(hami_node("n1", [V100, V100]))
    big = state.filter(hami_pod("big", 1, 20000), ["n1"])
    assert big.unresolvable == {
        "n1": "hami-like: node n1: 2/2 CardInsufficientMemory: nvidia.com/gpumem=20000 MiB per card is more "
        "than the card memory (16160 MiB, 16160 MiB)"
    }
    many = state.filter(hami_pod("many", 3, 1000), ["n1"])
    assert many.unresolvable == {
        "n1": "hami-like: node n1: NodeInsufficientDevice: nvidia.com/gpu=3 cards asked, the node has 2"
    }
    bind(state, hami_pod("hog", 1, 12000), "n1")
    busy = state.filter(hami_pod("two", 2, 5000), ["n1"])
    assert busy.failed == {
        "n1": "hami-like: node n1: 1/2 CardInsufficientMemory: 2 card(s) with 5000 MiB free needed, 1 have it"
    }
    assert state.filter(hami_pod("one", 1, 5000), ["n1"]).fits == ["n1"]


def test_hami_like_ignores_pods_without_nvidia_gpu_and_refuses_gpu_without_gpumem():
    state = hami_state(hami_node("n1", [V100]))
    assert state.filter(pod("aliyun", 4), ["n1"]).fits == ["n1"]  # not its business
    p = hami_pod("whole", 1, 1)
    del p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"]
    outcome = state.filter(p, ["n1"])
    assert "without nvidia.com/gpumem" in outcome.unresolvable["n1"]


# ---- hami-like device plugin -------------------------------------------------------------------------
def test_hami_like_plugin_registers_ten_virtual_devices_per_card_and_the_node_annotation():
    kube = FakeKube([])
    plugin = plugin_for(peers.HAMI_LIKE, kube, n=2)
    [res] = plugin.resources
    assert res.resource == "nvidia.com/gpu"
    ids = [d.id for d in res._devices()]
    assert len(ids) == 20 and ids[0] == f"{UUIDS[0]}-0" and ids[-1] == f"{UUIDS[1]}-9"
    plugin.publish_cards()
    register = json.loads(kube.node_annotations["hami.io/node-nvidia-register"])
    assert [(e["id"], e["devmem"], e["count"]) for e in register] == [(UUIDS[0], V100, 10), (UUIDS[1], V100, 10)]
    assert kube.node_annotations["hami.io/node-handshake"].startswith("Reported_")
    assert kube.capacity == {}  # nvidia.com/gpumem is advertised by nobody


def test_hami_like_allocate_gives_cards_limits_and_the_isolation_library():
    devices = f"{UUIDS[1]},NVIDIA,4096,0:{UUIDS[2]},NVIDIA,4096,0:;{UUIDS[0]},NVIDIA,1024,0:;"
    p = hami_pod("pair", [2, 1], [4096, 1024])
    p = bound(
        p,
        "node-1",
        {
            "hami.io/vgpu-devices-allocated": devices,
            "hami.io/vgpu-devices-to-allocate": devices,
            "hami.io/vgpu-node": "node-1",
            "hami.io/bind-phase": "allocating",
            "hami.io/bind-time": "1700000000",
        },
    )
    kube = FakeKube([p])
    plugin = plugin_for(peers.HAMI_LIKE, kube)
    first = allocate(plugin, "nvidia.com/gpu", [f"{UUIDS[0]}-3", f"{UUIDS[0]}-4"])  # which ones does not matter
    assert dict(first.envs) == {
        "NVIDIA_VISIBLE_DEVICES": f"{UUIDS[1]},{UUIDS[2]}",
        "CUDA_DEVICE_MEMORY_LIMIT_0": "4096m",
        "CUDA_DEVICE_MEMORY_LIMIT_1": "4096m",
        "LD_PRELOAD": "/usr/local/gpushare/lib/libgpushare-shim-hamilike.so",
    }
    assert [(m.container_path, m.host_path, m.read_only) for m in first.mounts] == [
        ("/usr/local/gpushare", "/var/lib/gpushare/native", True)
    ]
    assert kube.pod_patches[-1][2] == {"hami.io/vgpu-devices-to-allocate": f";{UUIDS[0]},NVIDIA,1024,0:;"}
    second = allocate(plugin, "nvidia.com/gpu", [f"{UUIDS[2]}-0"])
    assert dict(second.envs)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "1024m"
    assert kube.pod_patches[-1][2] == {"hami.io/vgpu-devices-to-allocate": ";;", "hami.io/bind-phase": "success"}
    with pytest.raises(AbortError, match="FAILED_PRECONDITION: hami-like: no pending pod on node node-1"):
        allocate(plugin, "nvidia.com/gpu", [f"{UUIDS[2]}-1"])
    with pytest.raises(AbortError, match="INVALID_ARGUMENT"):
        allocate(plugin, "nvidia.com/gpu", ["GPU-elsewhere-1"])


def test_hami_like_allocate_takes_the_earliest_bound_pod_asking_that_many_cards():
    def waiting(name: str, bind_time: str, devices: str) -> dict[str, Any]:
        return bound(
            hami_pod(name, devices.count(":"), 1000),
            "node-1",
            {
                "hami.io/vgpu-devices-to-allocate": devices,
                "hami.io/vgpu-node": "node-1",
                "hami.io/bind-phase": "allocating",
                "hami.io/bind-time": bind_time,
            },
        )

    pods = [
        waiting("later", "20", f"{UUIDS[0]},NVIDIA,1000,0:;"),
        waiting("earlier", "10", f"{UUIDS[1]},NVIDIA,1000,0:;"),
        waiting("two-cards", "5", f"{UUIDS[0]},NVIDIA,1000,0:{UUIDS[2]},NVIDIA,1000,0:;"),
    ]
    match = hami_like.match_pod(pods, "node-1", 1)
    assert (match.name, match.devices, match.pod_done) == ("earlier", ((UUIDS[1], 1000),), True)
    assert hami_like.match_pod(pods, "node-1", 2).name == "two-cards"


def test_hami_like_binds_one_pod_per_node_at_a_time_as_hamis_node_lock_does():
    """The kubelet's Allocate names no pod: two pods asking as many cards, bound in the
    same instant, could get each other's limits. The lock holds the second bind back
    until the first pod's containers are allocated."""
    from gpushare_stack.extender.state import BindError

    state = hami_state(hami_node("n1", [V100, V100, V100]))
    core = FakeCore()
    first, second = hami_pod("first", 1, 2048), hami_pod("second", 1, 3072)
    core.pods[("default", "first")] = first
    annotations = bind(state, first, "n1", core)
    lock = core.nodes["n1"]["metadata"]["annotations"]["hami.io/mutex.lock"]
    assert lock.endswith(",default,first") and hami_like.parse_lock(lock) is not None
    first["metadata"]["annotations"].update(annotations)
    with pytest.raises(BindError, match="node n1 is locked by pod default/first"):
        bind(state, second, "n1", core)
    assert state.used("n1") == {0: 2048}  # the refused bind reserved nothing
    # someone else's release leaves the lock alone; the holder's removes it
    assert not hami_like.release_node_lock(core, "n1", "default", "second")
    first["metadata"]["annotations"]["hami.io/bind-phase"] = "success"  # Allocate done ...
    assert hami_like.release_node_lock(core, "n1", "default", "first")  # ... and released
    assert "hami.io/mutex.lock" not in core.nodes["n1"]["metadata"]["annotations"]
    bind(state, second, "n1", core)
    assert core.nodes["n1"]["metadata"]["annotations"]["hami.io/mutex.lock"].endswith(",default,second")


@pytest.mark.parametrize(
    "holder_state",
    ["gone", "allocated", "admitted", "expired", "unreadable"],
)
def test_hami_like_a_stale_node_lock_is_taken_over(holder_state):
    state = hami_state(hami_node("n1", [V100, V100]))
    core = FakeCore()
    holder = bound(hami_pod("holder", 1, 1024), "n1", {"hami.io/bind-phase": "allocating"})
    since = hami_like.lock_value("default", "holder", __import__("time").time())
    if holder_state != "gone":
        core.pods[("default", "holder")] = holder
    if holder_state == "allocated":
        holder["metadata"]["annotations"]["hami.io/bind-phase"] = "success"
    elif holder_state == "admitted":
        holder["status"]["phase"] = "Running"
    elif holder_state == "expired":
        since = hami_like.lock_value("default", "holder", __import__("time").time() - hami_like.NODE_LOCK_TTL_S - 1)
    elif holder_state == "unreadable":
        since = "yesterday,default,holder"
    core.read_node("n1")
    core.nodes["n1"]["metadata"]["annotations"]["hami.io/mutex.lock"] = since
    bind(state, hami_pod("next", 1, 1024), "n1", core)
    assert core.nodes["n1"]["metadata"]["annotations"]["hami.io/mutex.lock"].endswith(",default,next")


def test_hami_like_a_lock_taken_concurrently_fails_the_bind_and_reserves_nothing():
    from gpushare_stack.extender.state import BindError

    state = hami_state(hami_node("n1", [V100]))
    core = FakeCore()
    real_patch = core.patch_node

    def racing_patch(name, body, _content_type=None):  # the kubelet writes the node every time
        core.nodes[name]["metadata"]["resourceVersion"] = str(int(core.nodes[name]["metadata"]["resourceVersion"]) + 7)
        real_patch(name, body, _content_type)

    core.patch_node = racing_patch
    with pytest.raises(BindError, match="node n1 kept changing while its lock was written"):
        bind(state, hami_pod("p", 1, 1024), "n1", core)
    assert state.used("n1") == {} and core.bindings == []


def test_hami_like_lock_and_release_retry_when_the_kubelet_wrote_the_node_meanwhile():
    state = hami_state(hami_node("n1", [V100]))
    core = FakeCore()
    real_patch, writes = core.patch_node, []

    def once_racing_patch(name, body, _content_type=None):  # a status update lands before each first try
        writes.append(body["metadata"]["annotations"])
        if len(writes) % 2:
            core.nodes[name]["metadata"]["resourceVersion"] += "0"
        real_patch(name, body, _content_type)

    core.patch_node = once_racing_patch
    p = hami_pod("p", 1, 1024)
    core.pods[("default", "p")] = p
    bind(state, p, "n1", core)
    assert core.nodes["n1"]["metadata"]["annotations"]["hami.io/mutex.lock"].endswith(",default,p")
    assert hami_like.release_node_lock(core, "n1", "default", "p")
    assert "hami.io/mutex.lock" not in core.nodes["n1"]["metadata"]["annotations"]
    assert len(writes) == 4


def test_hami_like_allocate_releases_the_node_lock_once_the_pod_is_done():
    devices = f"{UUIDS[0]},NVIDIA,1024,0:;"
    p = bound(
        hami_pod("solo", 1, 1024),
        "node-1",
        {
            "hami.io/vgpu-devices-to-allocate": devices,
            "hami.io/vgpu-node": "node-1",
            "hami.io/bind-phase": "allocating",
            "hami.io/bind-time": "1700000000",
        },
    )
    kube = FakeKube([p])
    allocate(plugin_for(peers.HAMI_LIKE, kube), "nvidia.com/gpu", [f"{UUIDS[0]}-0"])
    assert kube.released == [("node-1", "default", "solo")]
