"""The committed device-plugin stubs are exactly what generate.py makes from upstream."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushare_stack.api import api_pb2, generate
from gpushare_stack.api.dra import dra_pb2
from gpushare_stack.api.pluginregistration import registration_pb2


@pytest.mark.parametrize("name", sorted(generate.APIS))
def test_regenerating_gives_identical_files(tmp_path: Path, name: str):
    pytest.importorskip("grpc_tools")
    api = generate.APIS[name]
    if not api.source.is_file():
        pytest.skip(f"upstream {api.upstream} not downloaded at {api.source}")
    texts = generate.generate(api, api.source, tmp_path)
    for file in api.files:
        assert texts[file] == (api.directory / file).read_text(), f"{file} differs; run generate.py --api {name}"


def test_strip_gogo_removes_only_gogoproto():
    older = (
        'syntax = "proto3";\n'
        'import "github.com/gogo/protobuf/gogoproto/gogo.proto";\n'
        "option (gogoproto.goproto_stringer_all) = false;\n"
        "option (gogoproto.stringer_all) =  true;\n"
        'option go_package = "v1beta1";\n'
        "message Device {\n"
        '\tstring ID = 1 [(gogoproto.customname) = "ID"];\n'
        "\tstring health = 2 [deprecated = true, (gogoproto.nullable) = false];\n"
        "}\n"
    )
    assert generate.strip_gogo(older) == (
        'syntax = "proto3";\n'
        'option go_package = "v1beta1";\n'
        "message Device {\n"
        "\tstring ID = 1;\n"
        "\tstring health = 2 [deprecated = true];\n"
        "}\n"
    )


def test_stubs_carry_kubelet_service_names():
    services = api_pb2.DESCRIPTOR.services_by_name
    assert api_pb2.DESCRIPTOR.package == "v1beta1"
    assert [m.name for m in services["Registration"].methods] == ["Register"]
    assert [m.name for m in services["DevicePlugin"].methods] == [
        "GetDevicePluginOptions",
        "ListAndWatch",
        "GetPreferredAllocation",
        "Allocate",
        "PreStartContainer",
    ]


def test_dra_stubs_carry_the_service_kubelet_1_34_calls():
    """kubelet 1.34 calls k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin (advertised as "v1.DRAPlugin")."""
    assert dra_pb2.DESCRIPTOR.package == "k8s.io.kubelet.pkg.apis.dra.v1"
    service = dra_pb2.DESCRIPTOR.services_by_name["DRAPlugin"]
    assert [m.name for m in service.methods] == ["NodePrepareResources", "NodeUnprepareResources"]
    device = dra_pb2.Device(request_names=["gpu-0"], pool_name="vm", device_name="gpu-1", cdi_device_ids=["x/y=z"])
    assert dra_pb2.Device.FromString(device.SerializeToString()) == device
    claim = dra_pb2.Claim(namespace="ns", uid="u", name="c")
    assert [f.name for f in claim.DESCRIPTOR.fields] == ["namespace", "uid", "name"]


def test_registration_stubs_carry_the_plugin_watcher_service():
    assert registration_pb2.DESCRIPTOR.package == "pluginregistration"
    service = registration_pb2.DESCRIPTOR.services_by_name["Registration"]
    assert [m.name for m in service.methods] == ["GetInfo", "NotifyRegistrationStatus"]
    info = registration_pb2.PluginInfo(type="DRAPlugin", name="d", endpoint="/s", supported_versions=["v1.DRAPlugin"])
    assert registration_pb2.PluginInfo.FromString(info.SerializeToString()) == info
