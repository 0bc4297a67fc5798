"""The device plugin over the real v1beta1 gRPC API, with this test as the kubelet.

A Registration server on a temporary kubelet.sock records what the plugin registers;
the test then dials the plugin's own sockets as the kubelet does. Card discovery is
passed in (the NVML path is covered by test_discovery_mock_nvml.py); Allocate's pod
lookup needs an API server, so here only the paths that end before it are driven
(``test_matching.py`` covers the matching logic itself).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from concurrent import futures

import grpc
import pytest

from gpushare_conformance.fixtures.framework.wait import poll_until
from gpushare_stack import contract
from gpushare_stack.api import api_pb2, api_pb2_grpc
from gpushare_stack.deviceplugin.discovery import GpuCard
from gpushare_stack.deviceplugin.plugin import COUNT_SOCKET, MEM_SOCKET, DevicePlugin

V100 = 16160  # MiB: 15 GiB advertised per card


class FakeKubelet(api_pb2_grpc.RegistrationServicer):
    """The kubelet's Registration service, recording each RegisterRequest."""

    def __init__(self, socket_dir: str) -> None:
        self.path = os.path.join(socket_dir, contract.KUBELET_SOCKET_NAME)
        self.requests: list[api_pb2.RegisterRequest] = []
        self.registered = threading.Condition()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        api_pb2_grpc.add_RegistrationServicer_to_server(self, self.server)
        assert self.server.add_insecure_port(f"unix://{self.path}")
        self.server.start()

    def Register(self, request, context):  # noqa: N802
        with self.registered:
            self.requests.append(request)
            self.registered.notify_all()
        return api_pb2.Empty()

    def wait_for(self, n: int, timeout: float = 10.0) -> list[api_pb2.RegisterRequest]:
        with self.registered:
            assert self.registered.wait_for(lambda: len(self.requests) >= n, timeout), self.requests
            return list(self.requests)

    def stop(self) -> None:
        self.server.stop(grace=0).wait()
        if os.path.exists(self.path):
            os.unlink(self.path)


class Inventory:
    """The cards NVML would report; tests remove one to simulate a lost card."""

    def __init__(self, n: int) -> None:
        self.cards = [
            GpuCard(i, f"GPU-{i:08d}-0000-0000-0000-000000000000", "Tesla V100-SXM2-16GB", V100) for i in range(n)
        ]

    def __call__(self) -> list[GpuCard]:
        return list(self.cards)


@pytest.fixture
def socket_dir():
    path = tempfile.mkdtemp(prefix="dp-", dir="/tmp")  # unix socket paths must stay short
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def running(socket_dir):
    kubelet = FakeKubelet(socket_dir)
    inventory = Inventory(3)
    plugin = DevicePlugin(
        "node-1", inventory, kube=None, socket_dir=socket_dir, health_interval_s=0.2, kubelet_check_s=0.05
    )
    thread = threading.Thread(target=plugin.run, daemon=True)
    thread.start()
    kubelet.wait_for(2)
    # The kubelet records a request before the plugin's call returns; a test that stops
    # the kubelet in between would cancel the plugin's first registration (ci: 1 == 2).
    poll_until(lambda: plugin.registrations, lambda n: n == 1, timeout=10, what="the plugin's first registration")
    yield kubelet, inventory, plugin
    plugin.stop()
    thread.join(timeout=5)
    kubelet.stop()


def stub(socket_dir: str, name: str) -> api_pb2_grpc.DevicePluginStub:
    channel = grpc.insecure_channel(f"unix://{os.path.join(socket_dir, name)}")
    return api_pb2_grpc.DevicePluginStub(channel)


def test_registers_both_resources(running, socket_dir):
    kubelet, _, _ = running
    requests = kubelet.wait_for(2)
    assert {(r.version, r.endpoint, r.resource_name) for r in requests} == {
        ("v1beta1", MEM_SOCKET, "aliyun.com/gpu-mem"),
        ("v1beta1", COUNT_SOCKET, "aliyun.com/gpu-count"),
    }
    for r in requests:
        assert os.path.exists(os.path.join(socket_dir, r.endpoint))
    options = stub(socket_dir, MEM_SOCKET).GetDevicePluginOptions(api_pb2.Empty(), timeout=5)
    assert not options.pre_start_required and not options.get_preferred_allocation_available


def test_list_and_watch_advertises_gib_and_cards_then_streams_health(running, socket_dir):
    _, inventory, _ = running
    mem_stream = stub(socket_dir, MEM_SOCKET).ListAndWatch(api_pb2.Empty(), timeout=15)
    count_stream = stub(socket_dir, COUNT_SOCKET).ListAndWatch(api_pb2.Empty(), timeout=15)
    first = next(mem_stream)
    assert len(first.devices) == 3 * 15  # floor(16160 / 1024) GiB per card
    assert {d.health for d in first.devices} == {"Healthy"}
    uuids = {d.ID.rpartition("-_-")[0] for d in first.devices}
    assert uuids == {c.uuid for c in inventory.cards}
    assert all(len(d.ID) <= 63 for d in first.devices)
    assert [d.ID for d in next(count_stream).devices] == [c.uuid for c in inventory.cards]

    lost = inventory.cards.pop(1)  # the card falls off the bus
    update = next(mem_stream)
    unhealthy = {d.ID for d in update.devices if d.health == "Unhealthy"}
    assert unhealthy == {f"{lost.uuid}-_-{k}" for k in range(15)}
    assert len(update.devices) == 45  # the kubelet must see it go Unhealthy, not vanish
    counts = next(count_stream)
    assert {d.ID: d.health for d in counts.devices}[lost.uuid] == "Unhealthy"

    inventory.cards.insert(1, lost)  # and come back
    assert {d.health for d in next(mem_stream).devices} == {"Healthy"}
    mem_stream.cancel()
    count_stream.cancel()


def test_reregisters_when_kubelet_socket_is_recreated(running, socket_dir):
    kubelet, _, plugin = running
    kubelet.stop()
    for name in (MEM_SOCKET, COUNT_SOCKET):  # a restarting kubelet wipes the plugin sockets
        os.unlink(os.path.join(socket_dir, name))
    restarted = FakeKubelet(socket_dir)
    try:
        again = restarted.wait_for(2)
        assert {r.resource_name for r in again} == {"aliyun.com/gpu-mem", "aliyun.com/gpu-count"}
        mem_socket = os.path.join(socket_dir, MEM_SOCKET)
        poll_until(lambda: os.path.exists(mem_socket), bool, timeout=5, what=f"{mem_socket} served again")
        first = next(stub(socket_dir, MEM_SOCKET).ListAndWatch(api_pb2.Empty(), timeout=5))
        assert len(first.devices) == 45
        # The plugin counts a registration once both register calls have returned, which
        # on a busy machine can come a moment after the kubelet recorded them.
        poll_until(lambda: plugin.registrations, lambda n: n == 2, timeout=10, what="the plugin's second registration")
    finally:
        restarted.stop()


def test_allocate_refuses_unknown_device_ids(running, socket_dir):
    with pytest.raises(grpc.RpcError) as info:
        stub(socket_dir, MEM_SOCKET).Allocate(
            api_pb2.AllocateRequest(
                container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["GPU-nope-_-0"])]
            ),
            timeout=5,
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == "gpushare: device ID 'GPU-nope-_-0' names no card of node node-1"
    with pytest.raises(grpc.RpcError) as info:
        stub(socket_dir, MEM_SOCKET).Allocate(
            api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["garbage"])]),
            timeout=5,
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not of the form <uuid>-_-<k>" in info.value.details()


def test_allocate_without_api_access_fails_instead_of_guessing(running, socket_dir):
    _, inventory, _ = running
    ids = [f"{inventory.cards[0].uuid}-_-{k}" for k in range(8)]
    with pytest.raises(grpc.RpcError) as info:
        stub(socket_dir, MEM_SOCKET).Allocate(
            api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=ids)]), timeout=5
        )
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "cannot find the pod" in info.value.details()


def test_gpu_count_allocate_answers_every_container(running, socket_dir):
    _, inventory, _ = running
    response = stub(socket_dir, COUNT_SOCKET).Allocate(
        api_pb2.AllocateRequest(
            container_requests=[
                api_pb2.ContainerAllocateRequest(devices_ids=[inventory.cards[0].uuid]),
                api_pb2.ContainerAllocateRequest(devices_ids=[inventory.cards[1].uuid, inventory.cards[2].uuid]),
            ]
        ),
        timeout=5,
    )
    assert len(response.container_responses) == 2
    assert all(not r.envs and not r.mounts for r in response.container_responses)
