"""The DRA driver's kubelet-facing services: plugin registration and ``v1.DRAPlugin``.

The kubelet's plugin watcher finds the registration socket under
``/var/lib/kubelet/plugins_registry`` and asks it (``GetInfo``) for the driver's name,
the DRA service's socket and the service versions it speaks; kubelet 1.34 speaks
``v1.DRAPlugin``. For a pod using a claim of this driver, the kubelet calls
``NodePrepareResources`` with the claim's namespace, name and UID only: the plugin
reads the claim, takes the shares its allocation gives on this node
(``shares.claim_shares``) and answers the devices with one CDI device name per share.
A claim that cannot be served gets an error naming why, in its own entry of the
answer, so the kubelet reports it on the pod. ``NodeUnprepareResources`` forgets what
prepare recorded.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any, Protocol

import grpc

from gpushare_stack.api.dra import dra_pb2, dra_pb2_grpc
from gpushare_stack.api.pluginregistration import registration_pb2, registration_pb2_grpc
from gpushare_stack.dra.shares import ClaimError, Share, claim_shares
from gpushare_stack.dra.slices import DRIVER

log = logging.getLogger(__name__)

PLUGIN_TYPE = "DRAPlugin"
SERVICE_VERSIONS = ("v1.DRAPlugin",)
REGISTRY_DIR = "/var/lib/kubelet/plugins_registry"
PLUGINS_DIR = "/var/lib/kubelet/plugins"
CDI_KIND = "gpushare.conformance.io/gpu"


class ClaimSource(Protocol):
    def claim(self, namespace: str, name: str) -> dict[str, Any]: ...


def cdi_device_id(claim_uid: str, share: Share) -> str:
    """The fully qualified CDI name of one share: unique per claim and request."""
    return f"{CDI_KIND}={claim_uid}-{share.request}"


class Registration(registration_pb2_grpc.RegistrationServicer):
    """What the kubelet's plugin watcher asks first; it remembers the kubelet's verdict."""

    def __init__(self, driver: str, endpoint: str) -> None:
        self.driver = driver
        self.endpoint = endpoint
        self.registered = threading.Event()
        self.error = ""

    def GetInfo(self, request, context):  # noqa: N802 (gRPC names)
        return registration_pb2.PluginInfo(
            type=PLUGIN_TYPE, name=self.driver, endpoint=self.endpoint, supported_versions=list(SERVICE_VERSIONS)
        )

    def NotifyRegistrationStatus(self, request, context):  # noqa: N802
        if request.plugin_registered:
            self.error = ""
            self.registered.set()
            log.info("registered with the kubelet as DRA driver %s (%s)", self.driver, self.endpoint)
        else:
            self.error = request.error
            self.registered.clear()
            log.error("the kubelet refused DRA driver %s: %s", self.driver, request.error)
        return registration_pb2.RegistrationStatusResponse()


class DraPlugin(dra_pb2_grpc.DRAPluginServicer):
    """``v1.DRAPlugin``: prepare and unprepare the claims of pods on this node."""

    def __init__(
        self,
        node: str,
        claims: ClaimSource,
        driver: str = DRIVER,
        on_prepared: Callable[[dict[str, Any], list[Share]], None] | None = None,
        on_unprepared: Callable[[str], None] | None = None,
    ) -> None:
        self.node = node
        self.claims = claims
        self.driver = driver
        self._on_prepared = on_prepared
        self._on_unprepared = on_unprepared
        self._lock = threading.Lock()
        self.prepared: dict[str, list[Share]] = {}  # claim UID -> its shares

    def _prepare_one(self, ref: dra_pb2.Claim) -> dra_pb2.NodePrepareResourceResponse:
        where = f"claim {ref.namespace}/{ref.name}"
        try:
            claim = self.claims.claim(ref.namespace, ref.name)
        except Exception as exc:  # API errors: the kubelet retries the pod
            return dra_pb2.NodePrepareResourceResponse(error=f"{where}: cannot read it: {exc}")
        uid = (claim.get("metadata") or {}).get("uid")
        if uid != ref.uid:
            return dra_pb2.NodePrepareResourceResponse(
                error=f"{where}: its UID is {uid!r}, the kubelet asked for {ref.uid!r} (recreated?)"
            )
        try:
            shares = claim_shares(claim, self.driver, self.node)
        except ClaimError as exc:
            return dra_pb2.NodePrepareResourceResponse(error=str(exc))
        if self._on_prepared is not None:
            try:
                self._on_prepared(claim, shares)
            except Exception as exc:
                return dra_pb2.NodePrepareResourceResponse(error=f"{where}: preparing its shares failed: {exc}")
        with self._lock:
            self.prepared[ref.uid] = shares
        log.info("prepared %s: %s", where, ", ".join(f"{s.request} -> {s.device} ({s.memory_gib} GiB)" for s in shares))
        return dra_pb2.NodePrepareResourceResponse(
            devices=[
                dra_pb2.Device(
                    request_names=[s.request],
                    pool_name=self.node,
                    device_name=s.device,
                    cdi_device_ids=[cdi_device_id(ref.uid, s)],
                )
                for s in shares
            ]
        )

    def NodePrepareResources(self, request, context):  # noqa: N802
        return dra_pb2.NodePrepareResourcesResponse(claims={c.uid: self._prepare_one(c) for c in request.claims})

    def NodeUnprepareResources(self, request, context):  # noqa: N802
        answers = {}
        for ref in request.claims:
            with self._lock:
                self.prepared.pop(ref.uid, None)
            error = ""
            if self._on_unprepared is not None:
                try:
                    self._on_unprepared(ref.uid)
                except Exception as exc:
                    error = f"claim {ref.namespace}/{ref.name}: unpreparing failed: {exc}"
            answers[ref.uid] = dra_pb2.NodeUnprepareResourceResponse(error=error)
        return dra_pb2.NodeUnprepareResourcesResponse(claims=answers)


def serve(
    plugin: DraPlugin,
    registry_dir: str = REGISTRY_DIR,
    plugins_dir: str = PLUGINS_DIR,
) -> tuple[grpc.Server, Registration]:
    """Serve ``v1.DRAPlugin`` on ``<plugins_dir>/<driver>/dra.sock`` and registration on
    ``<registry_dir>/<driver>-reg.sock`` (the service first: the kubelet dials it as
    soon as it sees the registration socket)."""
    service_dir = os.path.join(plugins_dir, plugin.driver)
    os.makedirs(service_dir, exist_ok=True)
    endpoint = os.path.join(service_dir, "dra.sock")
    registration_socket = os.path.join(registry_dir, f"{plugin.driver}-reg.sock")
    for path in (endpoint, registration_socket):
        if os.path.exists(path):
            os.unlink(path)
    registration = Registration(plugin.driver, endpoint)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="dra"))
    dra_pb2_grpc.add_DRAPluginServicer_to_server(plugin, server)
    registration_pb2_grpc.add_RegistrationServicer_to_server(registration, server)
    for path in (endpoint, registration_socket):
        if server.add_insecure_port(f"unix://{path}") == 0:
            raise OSError(f"gpushare: cannot listen on {path}")
    server.start()
    return server, registration
