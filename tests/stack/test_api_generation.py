"""The committed device-plugin stubs are exactly what generate.py makes from upstream."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushare_stack.api import api_pb2, generate


def test_regenerating_gives_identical_files(tmp_path: Path):
    pytest.importorskip("grpc_tools")
    source = generate.DEFAULT_SOURCE
    if not source.is_file():
        pytest.skip(f"upstream api.proto not downloaded at {source}")
    texts = generate.generate(source, tmp_path)
    for name in (generate.PROTO_NAME, *generate.GENERATED):
        assert texts[name] == (generate.API_DIR / name).read_text(), f"{name} differs; run generate.py"


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
