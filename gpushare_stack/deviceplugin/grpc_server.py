"""One device-plugin gRPC server (``v1beta1.DevicePlugin``) on a unix socket."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent import futures

import grpc

from gpushare_stack import contract
from gpushare_stack.api import api_pb2, api_pb2_grpc
from gpushare_stack.deviceplugin.devices import Device

log = logging.getLogger(__name__)

AllocateFn = Callable[[api_pb2.AllocateRequest, grpc.ServicerContext], api_pb2.AllocateResponse]


class ResourcePlugin(api_pb2_grpc.DevicePluginServicer):
    """Serves one extended resource: its device list (streamed) and its Allocate."""

    def __init__(
        self, resource: str, socket_name: str, devices: Callable[[], list[Device]], allocate: AllocateFn
    ) -> None:
        self.resource = resource
        self.socket_name = socket_name
        self._devices = devices
        self._allocate = allocate
        self._changed = threading.Condition()
        self._generation = 0
        self._stopped = False
        self._server: grpc.Server | None = None

    # ---- v1beta1.DevicePlugin --------------------------------------------
    def GetDevicePluginOptions(self, request, context):  # noqa: N802 (gRPC names)
        return api_pb2.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=False)

    def ListAndWatch(self, request, context) -> Iterator[api_pb2.ListAndWatchResponse]:  # noqa: N802
        """Send the device list now and again after every health change."""
        seen = -1
        while context.is_active():
            with self._changed:
                while seen == self._generation and not self._stopped and context.is_active():
                    self._changed.wait(timeout=1.0)
                if self._stopped:
                    return
                seen = self._generation
            yield api_pb2.ListAndWatchResponse(
                devices=[api_pb2.Device(ID=d.id, health=d.health) for d in self._devices()]
            )

    def GetPreferredAllocation(self, request, context):  # noqa: N802
        # Not advertised (get_preferred_allocation_available=False): every GiB device of
        # a card is equivalent, the cards are fixed by the extender's annotations.
        context.abort(grpc.StatusCode.UNIMPLEMENTED, f"gpushare: {self.resource} has no preferred allocation")

    def Allocate(self, request, context):  # noqa: N802
        return self._allocate(request, context)

    def PreStartContainer(self, request, context):  # noqa: N802
        return api_pb2.PreStartContainerResponse()

    # ---- lifecycle ----------------------------------------------------------
    def devices_changed(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def serve(self, socket_dir: str) -> str:
        path = os.path.join(socket_dir, self.socket_name)
        if os.path.exists(path):
            os.unlink(path)
        with self._changed:
            self._stopped = False
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix=self.socket_name))
        api_pb2_grpc.add_DevicePluginServicer_to_server(self, server)
        if server.add_insecure_port(f"unix://{path}") == 0:
            raise RuntimeError(f"gpushare: cannot listen on unix socket {path}")
        server.start()
        self._server = server
        return path

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        if self._server is not None:
            self._server.stop(grace=1).wait()
            self._server = None


def _reference_line(resource: str, endpoint: str, kubelet_socket: str) -> str:
    return f"registered {resource} (endpoint {endpoint}) with {kubelet_socket}"


def register(
    kubelet_socket: str,
    plugin: ResourcePlugin,
    timeout_s: float = 10.0,
    line: Callable[[str, str, str], str] = _reference_line,
) -> None:
    """Register ``plugin`` with the kubelet's ``v1beta1.Registration`` service; then log
    ``line(resource, endpoint, kubelet socket)`` (each flavor words it as its stack does)."""
    with grpc.insecure_channel(f"unix://{kubelet_socket}") as channel:
        stub = api_pb2_grpc.RegistrationStub(channel)
        stub.Register(
            api_pb2.RegisterRequest(
                version=contract.DEVICE_PLUGIN_API_VERSION,
                endpoint=plugin.socket_name,
                resource_name=plugin.resource,
                options=api_pb2.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=False),
            ),
            timeout=timeout_s,
            wait_for_ready=True,
        )
    log.info("%s", line(plugin.resource, plugin.socket_name, kubelet_socket))
