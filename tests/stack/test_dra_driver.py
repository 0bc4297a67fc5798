"""The reference DRA driver's pieces (docs/dra.md): the slice a node publishes, the
shares a claim's allocation gives, and the kubelet-facing gRPC services, driven over
real unix sockets with this test as the kubelet."""

from __future__ import annotations

import json
import shutil
import tempfile

import grpc
import pytest

from gpushare_doubles import faults, registry
from gpushare_stack.api.dra import dra_pb2, dra_pb2_grpc
from gpushare_stack.api.pluginregistration import registration_pb2, registration_pb2_grpc
from gpushare_stack.deviceplugin.discovery import GpuCard
from gpushare_stack.dra import kubelet_plugin, shares, slices
from gpushare_stack.dra.containers import container_shares
from gpushare_stack.dra.edits import Preparer
from gpushare_stack.dra.publisher import SlicePublisher
from gpushare_stack.dra.shares import ClaimError, Share, claim_shares, quantity_bytes

DRIVER = slices.DRIVER
V100 = 16160  # MiB: 15 GiB per card
CARDS = [GpuCard(i, f"GPU-{i:08d}-0000-0000-0000-000000000000", "Tesla V100-SXM2-16GB", V100) for i in range(2)]


def test_each_card_is_one_device_shared_by_memory_in_gib_steps():
    published = slices.resource_slices("vm", [*CARDS, GpuCard(9, "GPU-tiny", "tiny", 1000)], generation=3)
    assert [s["metadata"]["name"] for s in published] == [f"vm-{DRIVER}-gpu-0", f"vm-{DRIVER}-gpu-1"]
    for slice_ in published:
        spec = slice_["spec"]
        assert (slice_["apiVersion"], slice_["kind"]) == ("resource.k8s.io/v1", "ResourceSlice")
        assert (spec["driver"], spec["nodeName"]) == (DRIVER, "vm")
        assert spec["pool"] == {"name": "vm", "generation": 3, "resourceSliceCount": 2}
    devices = [d for s in published for d in s["spec"]["devices"]]
    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"], "a card under 1 GiB takes no share"
    gpu1 = devices[1]
    assert gpu1["allowMultipleAllocations"] is True
    assert gpu1["attributes"]["uuid"] == {"string": CARDS[1].uuid} and gpu1["attributes"]["index"] == {"int": 1}
    assert gpu1["capacity"] == {
        "memory": {
            "value": "15Gi",
            "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "max": "15Gi", "step": "1Gi"}},
        }
    }
    assert slices.device_class()["spec"]["selectors"] == [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4Gi", 4 << 30), ("4096Mi", 4 << 30), ("4294967296", 4 << 30), ("1.5Gi", 3 << 29), ("2G", 2 * 10**9)],
)
def test_quantities(text, expected):
    assert quantity_bytes(text, "x") == expected


@pytest.mark.parametrize(("text", "says"), [("4GB", "not a quantity"), ("", "not a quantity"), ("0.3", "whole number")])
def test_bad_quantities_are_named(text, says):
    with pytest.raises(ClaimError, match=f"where: .*{says}"):
        quantity_bytes(text, "where")


def claim(results: list[dict] | None, uid: str = "uid-1") -> dict:
    status = {} if results is None else {"allocation": {"devices": {"results": results}}}
    return {"metadata": {"namespace": "ns", "name": "c", "uid": uid}, "status": status}


def result(request: str, device: str, memory: str | None = "4Gi", pool: str = "vm", driver: str = DRIVER) -> dict:
    out = {"request": request, "driver": driver, "pool": pool, "device": device, "shareID": f"share-{request}"}
    if memory is not None:
        out["consumedCapacity"] = {"memory": memory}
    return out


def test_a_claims_shares_are_its_results_of_this_driver_on_this_node():
    got = claim_shares(
        claim([result("gpu-0", "gpu-1"), result("other", "x", driver="other.example.com"), result("gpu-1", "gpu-0")]),
        DRIVER,
        "vm",
    )
    assert got == [Share("gpu-0", "gpu-1", 1, 4, "share-gpu-0"), Share("gpu-1", "gpu-0", 0, 4, "share-gpu-1")]


@pytest.mark.parametrize(
    ("results", "says"),
    [
        (None, r"claim ns/c: status.allocation is empty"),
        ([result("gpu-0", "gpu-0", pool="other-node")], r"results\[0\].pool is 'other-node', not this node 'vm'"),
        ([result("gpu-0", "tpu-0")], r"results\[0\].device is 'tpu-0', not a card of this driver"),
        ([result("gpu-0", "gpu-0", memory=None)], r"results\[0\].consumedCapacity.memory is missing"),
        ([result("gpu-0", "gpu-0", memory="1536Mi")], r"'1536Mi', not a whole number of GiB"),
        ([result("gpu-0", "gpu-0", driver="other.example.com")], r"no result of driver gpu.gpushare"),
    ],
)
def test_an_allocation_that_cannot_be_served_is_named(results, says):
    with pytest.raises(ClaimError, match=says):
        claim_shares(claim(results), DRIVER, "vm")


class Claims:
    def __init__(self, *objects: dict) -> None:
        self.objects = {o["metadata"]["name"]: o for o in objects}

    def claim(self, namespace: str, name: str) -> dict:
        return self.objects[name]


@pytest.fixture
def served():
    root = tempfile.mkdtemp(prefix="dra-", dir="/tmp")  # unix socket paths must stay short
    good = claim([result("gpu-0", "gpu-1"), result("gpu-1", "gpu-0")])
    bad = dict(
        claim([result("gpu-0", "gpu-0", memory="512Mi")], uid="uid-2"),
        metadata={"namespace": "ns", "name": "bad", "uid": "uid-2"},
    )
    plugin = kubelet_plugin.DraPlugin("vm", Claims(good, bad))
    server, registration = kubelet_plugin.serve(plugin, registry_dir=root, plugins_dir=root)
    yield root, plugin, registration
    server.stop(grace=0).wait()
    shutil.rmtree(root, ignore_errors=True)


def test_the_kubelet_finds_the_driver_and_its_service(served):
    root, plugin, registration = served
    channel = grpc.insecure_channel(f"unix://{root}/{DRIVER}-reg.sock")
    stub = registration_pb2_grpc.RegistrationStub(channel)
    info = stub.GetInfo(registration_pb2.InfoRequest(), timeout=5)
    assert (info.type, info.name, list(info.supported_versions)) == ("DRAPlugin", DRIVER, ["v1.DRAPlugin"])
    assert info.endpoint == f"{root}/{DRIVER}/dra.sock"  # a path: the kubelet adds "unix:" itself
    stub.NotifyRegistrationStatus(registration_pb2.RegistrationStatus(plugin_registered=True), timeout=5)
    assert registration.registered.is_set()
    stub.NotifyRegistrationStatus(registration_pb2.RegistrationStatus(plugin_registered=False, error="no"), timeout=5)
    assert not registration.registered.is_set() and registration.error == "no"


def test_prepare_answers_each_claim_with_its_shares_or_why_not(served):
    root, plugin, _ = served
    stub = dra_pb2_grpc.DRAPluginStub(grpc.insecure_channel(f"unix://{root}/{DRIVER}/dra.sock"))
    request = dra_pb2.NodePrepareResourcesRequest(
        claims=[
            dra_pb2.Claim(namespace="ns", name="c", uid="uid-1"),
            dra_pb2.Claim(namespace="ns", name="bad", uid="uid-2"),
            dra_pb2.Claim(namespace="ns", name="c", uid="uid-old"),
        ]
    )
    answer = stub.NodePrepareResources(request, timeout=5).claims
    good = answer["uid-1"]
    assert good.error == ""
    assert [(list(d.request_names), d.pool_name, d.device_name, list(d.cdi_device_ids)) for d in good.devices] == [
        (["gpu-0"], "vm", "gpu-1", ["gpushare.conformance.io/gpu=uid-1-gpu-0"]),
        (["gpu-1"], "vm", "gpu-0", ["gpushare.conformance.io/gpu=uid-1-gpu-1"]),
    ]
    assert "'512Mi', not a whole number of GiB" in answer["uid-2"].error and not answer["uid-2"].devices
    assert "its UID is 'uid-1', the kubelet asked for 'uid-old'" in answer["uid-old"].error
    assert set(plugin.prepared) == {"uid-1"}
    gone = stub.NodeUnprepareResources(
        dra_pb2.NodeUnprepareResourcesRequest(claims=[dra_pb2.Claim(namespace="ns", name="c", uid="uid-1")]), timeout=5
    )
    assert gone.claims["uid-1"].error == "" and plugin.prepared == {}


def test_the_share_figures_reach_what_prepares_the_container():
    seen = []
    plugin = kubelet_plugin.DraPlugin(
        "vm", Claims(claim([result("gpu-0", "gpu-1", memory="4096Mi")])), on_prepared=lambda c, s: seen.append(s)
    )
    answer = plugin.NodePrepareResources(
        dra_pb2.NodePrepareResourcesRequest(claims=[dra_pb2.Claim(namespace="ns", name="c", uid="uid-1")]), None
    )
    assert answer.claims["uid-1"].error == ""
    assert seen == [[shares.Share("gpu-0", "gpu-1", 1, 4, "share-gpu-0")]]


class SliceApi:
    """ResourceV1Api's slice calls over a dict, with resourceVersion and field selectors
    as the API server has them."""

    def __init__(self) -> None:
        self.slices: dict[str, dict] = {}
        self.version = 0
        self.calls: list[str] = []

    def list_resource_slice(self, field_selector="", **kwargs):
        wanted = dict(part.split("=", 1) for part in field_selector.split(",") if part)
        items = [
            s
            for s in self.slices.values()
            if all(s["spec"].get(key.removeprefix("spec.")) == value for key, value in wanted.items())
        ]
        return type("Response", (), {"data": json.dumps({"items": items}).encode()})()

    def _store(self, body):
        self.version += 1
        stored = json.loads(json.dumps(body))
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.slices[body["metadata"]["name"]] = stored

    def create_resource_slice(self, body, **kwargs):
        assert body["metadata"]["name"] not in self.slices
        self.calls.append("create")
        self._store(body)

    def replace_resource_slice(self, name, body, **kwargs):
        assert body["metadata"]["resourceVersion"] == self.slices[name]["metadata"]["resourceVersion"]
        self.calls.append("replace")
        self._store(body)

    def delete_resource_slice(self, name, **kwargs):
        self.calls.append("delete")
        del self.slices[name]


def _pool(api: SliceApi) -> list[tuple[str, int, int]]:
    """(device names, generation, slice count) of each stored slice, by name."""
    return [
        (
            [d["name"] for d in s["spec"]["devices"]],
            s["spec"]["pool"]["generation"],
            s["spec"]["pool"]["resourceSliceCount"],
        )
        for _, s in sorted(api.slices.items())
    ]


def test_the_slices_follow_the_cards_and_come_back_after_the_kubelet_wipes_them():
    api = SliceApi()
    publisher = SlicePublisher(api, "vm")
    assert publisher.publish(CARDS) == "created"
    assert publisher.publish(CARDS) == "unchanged"
    assert _pool(api) == [(["gpu-0"], 1, 2), (["gpu-1"], 1, 2)], "one slice per card, one pool"
    assert publisher.publish(CARDS[1:]) == "updated"  # card 0 fell off the bus
    assert _pool(api) == [(["gpu-1"], 2, 1)]
    api.slices.clear()  # the kubelet restarted
    assert publisher.publish(CARDS) == "created"
    assert _pool(api) == [(["gpu-0"], 3, 2), (["gpu-1"], 3, 2)]
    assert api.calls == ["create", "create", "replace", "delete", "create", "create"]
    # A new process finds the slices and goes on from their generation.
    again = SlicePublisher(api, "vm")
    assert again.publish(CARDS) == "unchanged" and again.publish(CARDS[:1]) == "updated"
    assert _pool(api) == [(["gpu-0"], 4, 1)]
    # Another node's slices are not this publisher's.
    SlicePublisher(api, "other").publish(CARDS[:1])
    assert again.publish(CARDS[:1]) == "unchanged"


def test_a_node_without_cards_publishes_an_empty_pool():
    api = SliceApi()
    SlicePublisher(api, "vm").publish([])
    assert _pool(api) == [([], 1, 1)]


def test_each_container_gets_the_shares_of_the_requests_it_uses():
    got = [Share("gpu-0", "gpu-1", 1, 4, "a"), Share("gpu-1", "gpu-0", 0, 4, "b")]
    pod = {
        "metadata": {"namespace": "ns", "name": "p"},
        "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "t"}],
            "containers": [
                {"name": "first", "resources": {"claims": [{"name": "gpus", "request": "gpu-0"}]}},
                {"name": "second", "resources": {"claims": [{"name": "gpus", "request": "gpu-1"}]}},
                {"name": "none"},
            ],
        },
        "status": {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "p-gpus-x7k"}]},
    }
    assert container_shares(pod, "p-gpus-x7k", got) == {"first": [got[0]], "second": [got[1]]}
    whole = json.loads(json.dumps(pod))
    whole["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    # Two containers on one share would each get its whole budget: refused.
    with pytest.raises(ClaimError, match="request 'gpu-1' of claim p-gpus-x7k is used by containers first, second"):
        container_shares(whole, "p-gpus-x7k", got)
    del whole["spec"]["containers"][1]["resources"]
    assert container_shares(whole, "p-gpus-x7k", got) == {"first": got}
    with pytest.raises(ClaimError, match="does not name claim other"):
        container_shares(pod, "other", got)
    pod["spec"]["containers"][1]["resources"]["claims"][0]["request"] = "gpu-7"
    with pytest.raises(ClaimError, match="uses request 'gpu-7' of claim p-gpus-x7k, which has no share"):
        container_shares(pod, "p-gpus-x7k", got)


class Pods:
    def __init__(self, *objects: dict) -> None:
        self.objects = {o["metadata"]["name"]: o for o in objects}

    def pod(self, namespace: str, name: str) -> dict:
        return self.objects[name]


def test_prepare_leaves_each_container_the_device_plugins_files_and_unprepare_takes_them(tmp_path):
    containers_dir, dra_dir = tmp_path / "containers", tmp_path / "dra"
    containers_dir.mkdir()
    pod = {
        "metadata": {"namespace": "ns", "name": "p", "uid": "pod-uid"},
        "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimName": "c"}],
            "containers": [{"name": "side"}, {"name": "main", "resources": {"claims": [{"name": "gpus"}]}}],
        },
    }
    allocated = claim([result("gpu-0", "gpu-1"), result("gpu-1", "gpu-0")])
    allocated["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "pod-uid"}]
    preparer = Preparer(Pods(pod), lambda: CARDS, "/host/native", str(containers_dir), str(dra_dir))
    plugin = kubelet_plugin.DraPlugin(
        "vm", Claims(allocated), on_prepared=preparer.prepare, on_unprepared=preparer.unprepare
    )
    ref = dra_pb2.Claim(namespace="ns", name="c", uid="uid-1")
    answer = plugin.NodePrepareResources(dra_pb2.NodePrepareResourcesRequest(claims=[ref]), None)
    assert answer.claims["uid-1"].error == ""
    written = dra_dir / "pod-uid" / "main.json"
    assert [p.name for p in (dra_dir / "pod-uid").iterdir()] == ["main.json"]
    assert written.stat().st_mode & 0o777 == 0o444
    edits = json.loads(written.read_text())
    env = edits["env"]
    assert env["NVIDIA_VISIBLE_DEVICES"] == "1,0"  # the cards in the order of the claim's requests
    assert env["GPUSHARE_MEMORY_LIMIT_0"] == env["GPUSHARE_MEMORY_LIMIT_1"] == "4GiB"
    mounts = {m["containerPath"]: (m["hostPath"], m["readOnly"]) for m in edits["mounts"]}
    assert mounts["/var/run/nvidia-container-devices/1"] == ("/dev/null", True)
    assert mounts["/etc/gpushare/limits"] == (str(containers_dir / "pod-uid-1" / "limits"), True)
    assert "GPUSHARE_MEMORY_LIMIT_1=4GiB" in (containers_dir / "pod-uid-1" / "limits").read_text()
    plugin.NodeUnprepareResources(dra_pb2.NodeUnprepareResourcesRequest(claims=[ref]), None)
    assert not (dra_dir / "pod-uid").exists()
    assert not (containers_dir / "pod-uid-1").exists(), "the container's limits, preload and accounting go too"


def test_a_restarted_plugin_unprepares_what_it_prepared_and_a_container_takes_one_claim(tmp_path):
    containers_dir, dra_dir = tmp_path / "containers", tmp_path / "dra"
    containers_dir.mkdir()
    pod = {
        "metadata": {"namespace": "ns", "name": "p", "uid": "pod-uid"},
        "spec": {
            "resourceClaims": [{"name": "a", "resourceClaimName": "ca"}, {"name": "b", "resourceClaimName": "cb"}],
            "containers": [{"name": "main", "resources": {"claims": [{"name": "a"}, {"name": "b"}]}}],
        },
    }

    def reserved(name: str, uid: str) -> dict:
        c = claim([result("gpu-0", "gpu-1")])
        c["metadata"].update(name=name, uid=uid)
        c["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "pod-uid"}]
        return c

    first = Preparer(Pods(pod), lambda: CARDS, "/n", str(containers_dir), str(dra_dir))
    share = [Share("gpu-0", "gpu-1", 1, 4, None)]
    first.prepare(reserved("ca", "uid-a"), share)
    with pytest.raises(ClaimError, match="container main of pod ns/p already takes its cards from claim uid-a"):
        first.prepare(reserved("cb", "uid-b"), share)
    first.prepare(reserved("ca", "uid-a"), share)  # the same claim again (the kubelet retries): fine
    again = Preparer(Pods(pod), lambda: CARDS, "/n", str(containers_dir), str(dra_dir))  # a new process
    assert again.unprepare("uid-other") == []
    removed = again.unprepare("uid-a")
    assert dra_dir / "pod-uid" / "main.json" in removed and containers_dir / "pod-uid-0" in removed
    assert not (dra_dir / "pod-uid").exists() and not (containers_dir / "pod-uid-0").exists()


def test_a_claim_reserved_for_no_pod_is_not_prepared(tmp_path):
    preparer = Preparer(Pods(), lambda: CARDS, "/n", str(tmp_path), str(tmp_path / "dra"))
    with pytest.raises(ClaimError, match="reserved for 0 pods"):
        preparer.prepare(claim([result("gpu-0", "gpu-1")]), [Share("gpu-0", "gpu-1", 1, 4, None)])


def test_the_fault_overcommit_capacity_publishes_each_card_twice_its_size():
    api = SliceApi()
    SlicePublisher(api, "vm", capacity_gib=registry.dra_plugin(faults.OVERCOMMIT_CAPACITY).capacity_gib()).publish(
        CARDS
    )
    devices = [d for _, s in sorted(api.slices.items()) for d in s["spec"]["devices"]]
    for device, card in zip(devices, CARDS, strict=True):
        memory = device["capacity"]["memory"]
        assert memory["value"] == f"{2 * card.memory_gib}Gi" == memory["requestPolicy"]["validRange"]["max"]


def test_the_fault_no_isolation_prepares_the_cards_without_the_shim_or_its_limits(tmp_path):
    containers_dir = tmp_path / "containers"
    containers_dir.mkdir()
    pod = {
        "metadata": {"namespace": "ns", "name": "p", "uid": "pod-uid"},
        "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimName": "c"}],
            "containers": [{"name": "main", "resources": {"claims": [{"name": "gpus"}]}}],
        },
    }
    allocated = claim([result("gpu-0", "gpu-1")])
    allocated["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "pod-uid"}]
    sound = Preparer(Pods(pod), lambda: CARDS, "/n", str(containers_dir), str(tmp_path / "sound"))
    broken = Preparer(
        Pods(pod),
        lambda: CARDS,
        "/n",
        str(containers_dir),
        str(tmp_path / "broken"),
        isolation=registry.dra_plugin(faults.NO_ISOLATION).isolation,
    )
    share = [Share("gpu-0", "gpu-1", 1, 4, None)]
    kept = json.loads(sound.prepare(allocated, share)["main"].read_text())
    dropped = json.loads(broken.prepare(allocated, share)["main"].read_text())
    assert "LD_PRELOAD" in kept["env"] and "GPUSHARE_MEMORY_LIMIT_0" in kept["env"]
    assert not [k for k in dropped["env"] if k == "LD_PRELOAD" or k.startswith("GPUSHARE_MEMORY_LIMIT")]
    assert dropped["env"]["NVIDIA_VISIBLE_DEVICES"] == "1"
    assert [m["containerPath"] for m in dropped["mounts"] if m["containerPath"].startswith("/etc/gpushare")] == []
