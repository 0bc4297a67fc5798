"""Inventories are real YAML on both sides: the mock libraries (libyaml) and
fixtures/inventory.py (PyYAML) accept the same documents, apply the same model
profiles (native/models/gpu-models.yaml) and refuse the same way, word for word."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import PYTHON, run, tool
from gpushare_conformance import native
from gpushare_conformance.fixtures.inventory import (
    InventoryError,
    cards_from_inventory,
    load_inventory,
    parse_inventory_text,
)

REPO = native.repo_root()

BLOCK = """\
driver_version: "470.82.01"
cuda_version: "11.4"
gpus:
  - name: Tesla V100-SXM2-16GB
    memory_mib: 16160
    pci_bus_id: 00000000:00:10.0
  - model: A100-SXM4-40GB
    power_limit_w: 250
  - name: Tesla T4
    memory_mib: 15109
    uuid: GPU-11111111-2222-3333-4444-555555555555
"""
FLOW = """\
{driver_version: "470.82.01", cuda_version: "11.4", gpus: [
  {name: "Tesla V100-SXM2-16GB", memory_mib: 16160, pci_bus_id: "0000:00:10.0"},
  {model: A100-SXM4-40GB, power_limit_w: 250},
  {name: 'Tesla T4', memory_mib: "15109", uuid: GPU-11111111-2222-3333-4444-555555555555}]}
"""
JSON = json.dumps(
    {
        "driver_version": "470.82.01",
        "cuda_version": "11.4",
        "gpus": [
            {"name": "Tesla V100-SXM2-16GB", "memory_mib": 16160, "pci_bus_id": "00000000:00:10.0"},
            {"model": "A100-SXM4-40GB", "power_limit_w": 250},
            {"name": "Tesla T4", "memory_mib": 15109, "uuid": "GPU-11111111-2222-3333-4444-555555555555"},
        ],
    }
)
ANCHORS = """\
--- # a document marker, comments, anchors and aliases
driver_version: &drv "470.82.01"
cuda_version: '11.4'
gpus:
  - &v100 {name: Tesla V100-SXM2-16GB, memory_mib: 16160, pci_bus_id: 0000:00:10.0}
  - model: A100-SXM4-40GB
    power_limit_w: 250
  - name: Tesla T4  # trailing comment
    memory_mib: 15109
    uuid: "GPU-11111111-2222-3333-4444-555555555555"
"""

DUMP = r"""
import json, pynvml
pynvml.nvmlInit()
out = {"driver": pynvml.nvmlSystemGetDriverVersion(), "cuda": pynvml.nvmlSystemGetCudaDriverVersion(), "gpus": []}
for i in range(pynvml.nvmlDeviceGetCount()):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    pci = pynvml.nvmlDeviceGetPciInfo(h)
    out["gpus"].append({"name": pynvml.nvmlDeviceGetName(h), "uuid": pynvml.nvmlDeviceGetUUID(h),
        "memory_mib": pynvml.nvmlDeviceGetMemoryInfo(h).total >> 20, "pci_bus_id": pci.busId,
        "pci_device_id": pci.pciDeviceId, "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(h) // 1000,
        "compute_capability": "%d.%d" % pynvml.nvmlDeviceGetCudaComputeCapability(h),
        "clock_sm_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)})
print(json.dumps(out))
"""
KEYS = (
    "name",
    "uuid",
    "memory_mib",
    "pci_bus_id",
    "pci_device_id",
    "power_limit_w",
    "compute_capability",
    "clock_sm_max_mhz",
)


def env_for(path: Path, native_root: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "GPUSHARE_MOCK_INVENTORY": str(path),
        "LD_LIBRARY_PATH": str(native.mock_lib_dir(native_root)),
        "GPUSHARE_MOCK_STATE_DIR": str(path.parent),
    }


def c_view(path: Path, native_root: Path) -> dict:
    out = run([PYTHON, "-c", DUMP], env_for(path, native_root))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def c_error(path: Path, native_root: Path) -> str:
    """The mock NVML's refusal (through nvidia-smi, exit 9 as the real tool)."""
    smi = run([tool(native_root, "nvidia-smi"), "-L"], env_for(path, native_root))
    assert smi.returncode == 9, smi.stdout
    lines = [line for line in smi.stderr.splitlines() if line.startswith("gpushare-mock-nvml: ")]
    assert len(lines) == 1, smi.stderr
    return lines[0].removeprefix("gpushare-mock-nvml: ")


def py_view(path: Path) -> dict:
    data = load_inventory(path)
    return {
        "driver": data["driver_version"],
        "cuda": data["cuda_version"],
        "gpus": [{k: g[k] for k in KEYS} for g in data["gpus"]],
    }


def as_c(view: dict) -> dict:
    major, minor = view["cuda"].split(".")
    return {**view, "cuda": int(major) * 1000 + int(minor) * 10}


def test_every_yaml_style_gives_the_same_inventory_in_c_and_python(tmp_path, native_root):
    views = {}
    for style, text in {"block": BLOCK, "flow": FLOW, "json": JSON, "anchors": ANCHORS}.items():
        path = tmp_path / style / "inventory.yaml"
        path.parent.mkdir()
        path.write_text(text)
        c, py = c_view(path, native_root), as_c(py_view(path))
        assert c == py, style
        views[style] = c
    assert views["flow"] == views["block"] == views["json"] == views["anchors"]
    gpus = views["block"]["gpus"]
    assert [g["memory_mib"] for g in gpus] == [16160, 40536, 15109]  # the A100's 470-driver total
    assert gpus[1]["power_limit_w"] == 250 and gpus[1]["name"] == "NVIDIA A100-SXM4-40GB"
    assert gpus[2]["compute_capability"] == "7.5" and gpus[2]["pci_bus_id"] == "00000000:00:09.0"


def test_the_flow_style_of_the_issue_is_accepted(tmp_path, native_root):
    path = tmp_path / "inventory.yaml"
    path.write_text(
        'driver_version: "470.82.01"\ncuda_version: "11.4"\n'
        'gpus:\n  - {name: "Tesla V100-SXM2-16GB", memory_mib: 16160}\n'
    )
    assert c_view(path, native_root)["gpus"][0]["memory_mib"] == 16160
    assert load_inventory(path)["gpus"][0]["memory_mib"] == 16160


@pytest.mark.parametrize(
    ("driver", "totals"), [("470.82.01", [16160, 81251, 15109]), ("535.104.05", [16384, 81920, 15360])]
)
def test_a_model_alone_describes_a_card(tmp_path, native_root, driver, totals):
    path = tmp_path / "inventory.yaml"
    path.write_text(
        f'driver_version: "{driver}"\ngpus:\n  - model: V100-SXM2-16GB\n  - model: A100-SXM4-80GB\n  - model: T4\n'
    )
    c, py = c_view(path, native_root), py_view(path)
    assert c == as_c(py)
    assert [g["memory_mib"] for g in c["gpus"]] == totals
    assert [g["name"] for g in c["gpus"]] == ["Tesla V100-SXM2-16GB", "NVIDIA A100-SXM4-80GB", "Tesla T4"]
    assert c["cuda"] == (11040 if driver.startswith("470") else 12020)  # from the driver branch
    assert [card.memory_mib for card in cards_from_inventory(load_inventory(path))] == totals
    # the mock CUDA sees the same cards
    raw = run([tool(native_root, "gpushare-probe"), "--raw"], env_for(path, native_root)).stdout
    assert [f"total_bytes={t << 20}" in line for t, line in zip(totals, raw.splitlines(), strict=True)] == [True] * 3


LOST = r"""
import json, pynvml
pynvml.nvmlInit()
lost = []
for i in range(pynvml.nvmlDeviceGetCount()):
    try:
        pynvml.nvmlDeviceGetHandleByIndex(i)
        lost.append(False)
    except pynvml.NVMLError_GpuIsLost:
        lost.append(True)
print(json.dumps(lost))
"""


def test_lost_reads_alike_in_c_and_python_and_survives_the_container_view(tmp_path, native_root):
    path = tmp_path / "inventory.yaml"
    path.write_text(
        'driver_version: "470.82.01"\ngpus:\n  - {model: T4, lost: true}\n  - {model: T4, lost: false}\n  - model: T4\n'
    )
    assert [g["lost"] for g in load_inventory(path)["gpus"]] == [True, False, False]
    assert [card.lost for card in cards_from_inventory(load_inventory(path))] == [True, False, False]
    env = env_for(path, native_root)
    assert json.loads(run([PYTHON, "-c", LOST], env).stdout) == [True, False, False]
    view = json.loads(run([PYTHON, "-c", LOST], dict(env, NVIDIA_VISIBLE_DEVICES="2,0")).stdout)
    assert view == [False, True]  # the physical card 0, renumbered 1, is still lost


def test_the_default_inventory_is_unchanged(native_root):
    path = REPO / "ci" / "local" / "inventory-default.yaml"
    c = c_view(path, native_root)
    assert c == as_c(py_view(path))
    assert [g["memory_mib"] for g in c["gpus"]] == [16160] * 4 and c["cuda"] == 11040


def test_model_profiles_file_is_what_the_libraries_build_in(tmp_path, native_root):
    """Every profile of the data file, as a model-only card, reads the same in C and Python."""
    import yaml

    ids = list(yaml.safe_load((REPO / "native" / "models" / "gpu-models.yaml").read_text())["models"])
    assert len(ids) >= 10
    path = tmp_path / "inventory.yaml"
    path.write_text('driver_version: "550.54.15"\ngpus:\n' + "".join(f"  - model: {i}\n" for i in ids))
    c = c_view(path, native_root)
    assert c == as_c(py_view(path))
    assert len({g["pci_device_id"] for g in c["gpus"]}) == len(ids)


BAD = [
    ('driver_version: "470"\ncuda_version: "11.4"\n', ": missing required key 'gpus'"),
    ('cuda_version: "11.4"\ngpus: []\n', ": missing required key 'driver_version'"),
    ('driver_version: "470"\ngpus:\n  - name: T4\n', ":3: gpus[0]: missing required key 'memory_mib'"),
    ('driver_version: "470"\ngpus:\n  - memory_mib: 5\n', ":3: gpus[0]: missing required key 'name' (or 'model')"),
    (
        'driver_version: "470"\ngpus:\n  - {name: T4, memory_mib: 15x}\n',
        ":3: gpus[0].memory_mib: expected a positive integer (MiB), got '15x'",
    ),
    (
        'driver_version: "470"\ncuda_version: 11.4.1\ngpus: []\n',
        ":2: cuda_version: expected a version like \"11.4\", got '11.4.1'",
    ),
    (
        'driver_version: "470"\ncolour: red\ngpus: []\n',
        ":2: unknown key 'colour' (expected driver_version, cuda_version, gpus)",
    ),
    ('driver_version: "470"\ngpus:\n  - model: V100\n', ":3: gpus[0].model: unknown model 'V100' (known: "),
    (
        'driver_version: "470"\ngpus:\n  - {model: T4, compute_capability: seven}\n',
        ':3: gpus[0].compute_capability: expected "MAJOR.MINOR" like "7.0", got \'seven\'',
    ),
    ('driver_version: "470"\ngpus:\n  - {model: T4, mig: yes}\n', ":3: gpus[0].mig: expected true or false, got 'yes'"),
    (
        'driver_version: "470"\ngpus:\n  - {model: T4, lost: yes}\n',
        ":3: gpus[0].lost: expected true or false, got 'yes'",
    ),
    (
        'driver_version: "470"\ngpus:\n  - model: T4\n  - model: T4\n    lost: "True"\n',
        ":5: gpus[1].lost: expected true or false, got 'True'",
    ),
    ('driver_version: "470"\ngpus:\n  - {model: T4, lost: [true]}\n', ":3: gpus[0].lost: expected a single value"),
    (
        'driver_version: "470"\ngpus:\n  - {model: T4, xid: -48}\n',
        ":3: gpus[0].xid: expected an Xid number 0-999, got '-48'",
    ),
    (
        'driver_version: "470"\ngpus:\n  - {model: T4, xid: 1000}\n',
        ":3: gpus[0].xid: expected an Xid number 0-999, got '1000'",
    ),
    (
        'driver_version: "470"\ngpus:\n  - {model: T4, xid: ecc}\n',
        ":3: gpus[0].xid: expected an Xid number 0-999, got 'ecc'",
    ),
    (
        'driver_version: "470"\ngpus:\n  - {model: T4, architecture: fermi}\n',
        ":3: gpus[0].architecture: expected one of kepler, maxwell, pascal, volta, turing, ampere, ada, hopper, "
        "blackwell, got 'fermi'",
    ),
    ('driver_version: "470"\ngpus:\n  - model: T4\n    model: P4\n', ":4: gpus[0]: duplicate key 'model'"),
    ('driver_version: "470"\ngpus:\n  - model: T4\n    size: 3\n', ":4: gpus[0]: unknown key 'size' (expected model"),
    ('driver_version: "470"\ngpus:\n  - model: T4\n    uuid: [a]\n', ":4: gpus[0].uuid: expected a single value"),
    ('driver_version: "470"\ngpus:\n  - T4\n', ":3: gpus[0]: expected a mapping (name: ..., memory_mib: ...)"),
    ('driver_version: "470"\ngpus: {model: T4}\n', ":2: gpus: expected a list, got 'a mapping'"),
    (
        'driver_version: "470"\ngpus:\n  - {model: T4, pci_bus_id: zz}\n',
        ":3: gpus[0].pci_bus_id: expected 'DDDDDDDD:BB:DD.F' (hex), got 'zz'",
    ),
    ('driver_version: "470"\ngpus: [{model: T4}, {model: T4, uuid: GPU-x}]\n', ":2: gpus[1].uuid: expected 'GPU-...'"),
    (
        'driver_version: "470"\ngpus:\n  - model: T4\n  - {model: T4, pci_bus_id: "0000:00:07.0"}\n',
        ": gpus[0] and gpus[1] share pci_bus_id '00000000:00:07.0'",
    ),
    ('driver_version: "300"\ngpus: []\n', ": missing required key 'cuda_version' (no default for driver 300)"),
    ("- a\n- b\n", ":1: expected a mapping with driver_version, cuda_version, gpus"),
    ("", ": empty document (expected driver_version, cuda_version, gpus)"),
    ('driver_version: "470"\ngpus: []\n---\ndriver_version: "470"\n', ":3: more than one YAML document"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_c_and_python_refuse_alike_naming_file_line_and_field(tmp_path, native_root, text, message):
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    c = c_error(path, native_root)
    with pytest.raises(InventoryError) as py:
        load_inventory(path)
    assert c.startswith(f"{path}{message}"), c
    assert str(py.value) == c


@pytest.mark.parametrize(
    ("text", "prefix"),
    [
        ('driver_version: "470"\ngpus:\n\t- name: T4\n', ":3: tab character (indent with spaces)"),
        ('driver_version: "470"\ngpus:\n  - {name: "T4", memory_mib: 1\n', ": YAML syntax error"),
        ('driver_version: "470\ngpus: []\n', ": YAML syntax error"),
    ],
)
def test_yaml_syntax_errors_name_the_line_on_both_sides(tmp_path, native_root, text, prefix):
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    c = c_error(path, native_root)
    with pytest.raises(InventoryError) as py:
        load_inventory(path)
    line_c, line_py = c.split(":")[1], str(py.value).split(":")[1]
    assert line_c.isdigit() and line_c == line_py, (c, str(py.value))
    head, _, tail = prefix.partition(": ")
    assert c.startswith(f"{path}{head}" if head else f"{path}:") and tail in c and tail in str(py.value)


def test_parse_inventory_text_names_its_source():
    with pytest.raises(InventoryError, match=r"^node-a:2: unknown key 'x'"):
        parse_inventory_text('driver_version: "470"\nx: 1\ngpus: []\n', "node-a")


def test_libyaml_is_built_in_not_needed_at_run_time(native_root):
    for lib in ("libnvidia-ml.so.1", "libcuda.so.1"):
        path = native.lib_dir(native_root) / lib
        needed = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
        assert "yaml" not in needed
        dyn = subprocess.run(
            ["nm", "-D", "--defined-only", str(path)], capture_output=True, text=True, check=True
        ).stdout
        assert " yaml_" not in dyn
