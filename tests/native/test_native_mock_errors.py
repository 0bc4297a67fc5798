"""The mocks answer bad calls with the real libraries' error codes (ctypes, real pynvml)."""

from __future__ import annotations

import json

import pytest

from conftest import PYTHON, run, tool

NVML_SCRIPT = r"""
import ctypes, json, pynvml
lib = ctypes.CDLL("libnvidia-ml.so.1")
out = {}
c = ctypes.c_uint()
h = ctypes.c_void_p()
out["count_before_init"] = lib.nvmlDeviceGetCount_v2(ctypes.byref(c))
out["shutdown_before_init"] = lib.nvmlShutdown()
out["init"] = lib.nvmlInit_v2()
out["count"] = (lib.nvmlDeviceGetCount_v2(ctypes.byref(c)), c.value)
out["index_out_of_range"] = lib.nvmlDeviceGetHandleByIndex_v2(2, ctypes.byref(h))
out["uuid_unknown"] = lib.nvmlDeviceGetHandleByUUID(b"GPU-00000000-0000-0000-0000-000000000000", ctypes.byref(h))
out["bus_unknown"] = lib.nvmlDeviceGetHandleByPciBusId_v2(b"0000:99:00.0", ctypes.byref(h))
out["bus_short_domain"] = lib.nvmlDeviceGetHandleByPciBusId_v2(b"0000:00:0A.0", ctypes.byref(h))
idx = ctypes.c_uint()
lib.nvmlDeviceGetIndex(h, ctypes.byref(idx)); out["bus_short_domain_index"] = idx.value
name = ctypes.create_string_buffer(4)
lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
out["name_too_small"] = lib.nvmlDeviceGetName(h, name, 4)
out["bad_handle"] = lib.nvmlDeviceGetName(ctypes.c_void_p(12345), name, 4)
class Mem2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong), ("reserved", ctypes.c_ulonglong),
                ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
m = Mem2(version=1)
out["mem_v2_wrong_version"] = lib.nvmlDeviceGetMemoryInfo_v2(h, ctypes.byref(m))
out["null_pointer"] = lib.nvmlDeviceGetMemoryInfo(h, None)
out["fan"] = lib.nvmlDeviceGetFanSpeed(h, ctypes.byref(c))
lib.nvmlErrorString.restype = ctypes.c_char_p
out["strings"] = [lib.nvmlErrorString(i).decode() for i in (0, 1, 2, 3, 6, 7, 25, 999)]
out["pynvml_error"] = None
pynvml.nvmlInit()
try:
    pynvml.nvmlDeviceGetHandleByIndex(7)
except pynvml.NVMLError as e:
    out["pynvml_error"] = [e.value, str(e)]
pynvml.nvmlShutdown()
out["shutdown"] = lib.nvmlShutdown()
out["after_shutdown"] = lib.nvmlDeviceGetCount_v2(ctypes.byref(c))
print(json.dumps(out))
"""

CUDA_SCRIPT = r"""
import ctypes, json
lib = ctypes.CDLL("libcuda.so.1")
out = {}
n = ctypes.c_int()
d = ctypes.c_int()
p = ctypes.c_uint64()
ctx = ctypes.c_void_p()
fn = ctypes.c_void_p()
out["before_init"] = lib.cuDeviceGetCount(ctypes.byref(n))
out["proc_before_init"] = lib.cuGetProcAddress_v2(b"cuMemAlloc", ctypes.byref(fn), 12000, 0, None)
out["init_bad_flags"] = lib.cuInit(1)
out["init"] = lib.cuInit(0)
out["count"] = (lib.cuDeviceGetCount(ctypes.byref(n)), n.value)
out["bad_ordinal"] = lib.cuDeviceGet(ctypes.byref(d), 5)
out["bad_device_name"] = lib.cuDeviceGetName(ctypes.create_string_buffer(64), 64, 9)
out["alloc_no_context"] = lib.cuMemAlloc_v2(ctypes.byref(p), 1 << 20)
out["info_no_context"] = lib.cuMemGetInfo_v2(ctypes.byref(ctypes.c_size_t()), ctypes.byref(ctypes.c_size_t()))
lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0)
lib.cuCtxSetCurrent(ctx)
out["alloc_zero"] = lib.cuMemAlloc_v2(ctypes.byref(p), 0)
out["alloc_card_plus_one"] = lib.cuMemAlloc_v2(ctypes.byref(p), (16160 << 20) + 1)
out["free_unknown"] = lib.cuMemFree_v2(ctypes.c_uint64(0xdead0000))
out["destroy_primary"] = lib.cuCtxDestroy_v2(ctx)
out["proc_unknown"] = lib.cuGetProcAddress_v2(b"cuNoSuchThing", ctypes.byref(fn), 12000, 0, None)
out["proc_too_old"] = lib.cuGetProcAddress(b"cuGetProcAddress", ctypes.byref(fn), 11000, 0)
out["proc_alloc"] = lib.cuGetProcAddress(b"cuMemAlloc", ctypes.byref(fn), 12000, 0)
out["proc_alloc_is_v2"] = fn.value == ctypes.cast(lib.cuMemAlloc_v2, ctypes.c_void_p).value
s = ctypes.c_char_p()
out["names"] = []
for code in (0, 1, 2, 3, 100, 101, 201, 500, 999):
    lib.cuGetErrorName(code, ctypes.byref(s)); name = s.value.decode()
    lib.cuGetErrorString(code, ctypes.byref(s)); out["names"].append([name, s.value.decode()])
out["name_unknown_code"] = lib.cuGetErrorName(123456, ctypes.byref(s))
ver = ctypes.c_int()
lib.cuDriverGetVersion(ctypes.byref(ver)); out["version"] = ver.value
print(json.dumps(out))
"""


def test_nvml_error_codes(seed_env):
    proc = run([PYTHON, "-c", NVML_SCRIPT], seed_env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["count_before_init"] == 1 and out["shutdown_before_init"] == 1  # NVML_ERROR_UNINITIALIZED
    assert out["init"] == 0 and out["count"] == [0, 2]
    assert out["index_out_of_range"] == 2  # NVML_ERROR_INVALID_ARGUMENT
    assert out["uuid_unknown"] == 6 and out["bus_unknown"] == 6  # NVML_ERROR_NOT_FOUND
    assert out["bus_short_domain"] == 0 and out["bus_short_domain_index"] == 1
    assert out["name_too_small"] == 7  # NVML_ERROR_INSUFFICIENT_SIZE
    assert out["bad_handle"] == 2
    assert out["mem_v2_wrong_version"] == 25  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    assert out["null_pointer"] == 2
    assert out["fan"] == 3  # NVML_ERROR_NOT_SUPPORTED
    assert out["strings"] == [
        "Success",
        "Uninitialized",
        "Invalid Argument",
        "Not Supported",
        "Not Found",
        "Insufficient Size",
        "Argument version mismatch",
        "Unknown Error",
    ]
    assert out["pynvml_error"] == [2, "Invalid Argument"]
    assert out["shutdown"] == 0 and out["after_shutdown"] == 1


def test_cuda_error_codes(bare_env):
    proc = run([PYTHON, "-c", CUDA_SCRIPT], bare_env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["before_init"] == 3  # CUDA_ERROR_NOT_INITIALIZED
    assert out["proc_before_init"] == 0  # cuGetProcAddress works before cuInit
    assert out["init_bad_flags"] == 1 and out["init"] == 0 and out["count"] == [0, 2]
    assert out["bad_ordinal"] == 101 and out["bad_device_name"] == 101  # CUDA_ERROR_INVALID_DEVICE
    assert out["alloc_no_context"] == 201 and out["info_no_context"] == 201  # CUDA_ERROR_INVALID_CONTEXT
    assert out["alloc_zero"] == 1 and out["alloc_card_plus_one"] == 2 and out["free_unknown"] == 1
    assert out["destroy_primary"] == 201
    assert out["proc_unknown"] == 500 and out["proc_too_old"] == 500  # CUDA_ERROR_NOT_FOUND
    assert out["proc_alloc"] == 0 and out["proc_alloc_is_v2"] is True
    assert out["names"] == [
        ["CUDA_SUCCESS", "no error"],
        ["CUDA_ERROR_INVALID_VALUE", "invalid argument"],
        ["CUDA_ERROR_OUT_OF_MEMORY", "out of memory"],
        ["CUDA_ERROR_NOT_INITIALIZED", "initialization error"],
        ["CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"],
        ["CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"],
        ["CUDA_ERROR_INVALID_CONTEXT", "invalid device context"],
        ["CUDA_ERROR_NOT_FOUND", "named symbol not found"],
        ["CUDA_ERROR_UNKNOWN", "unknown error"],
    ]
    assert out["name_unknown_code"] == 1
    assert out["version"] == 11040


def test_physical_card_accounting_without_the_shim(bare_env, native_root):
    probe = tool(native_root, "gpushare-probe")
    # The card is 16160 MiB and a context keeps some: 16160 MiB in one piece cannot fit.
    assert run([probe, "--device", "0", "--alloc-mib", "16160"], bare_env).returncode == 2
    assert run([probe, "--device", "0", "--alloc-mib", "3000", "--count", "5"], bare_env).returncode == 0
    many = run([probe, "--device", "0", "--alloc-mib", "3000", "--count", "6"], bare_env)
    assert many.returncode == 2 and "CUDA_ERROR_OUT_OF_MEMORY" in many.stdout


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('driver_version: "470"\ncuda_version: "11.4"\n', ": missing required key 'gpus'"),
        (
            'driver_version: "470"\ncuda_version: "11.4"\ngpus:\n  - name: T4\n',
            ":4: gpus[0]: missing required key 'memory_mib'",
        ),
        (
            'driver_version: "470"\ncuda_version: "11.4"\ngpus:\n  - name: T4\n    memory_mib: 15x\n',
            ":5: gpus[0].memory_mib: expected a positive integer (MiB), got '15x'",
        ),
        (
            'driver_version: "470"\ncuda_version: "eleven"\ngpus: []\n',
            ":2: cuda_version: expected a version like \"11.4\", got 'eleven'",
        ),
        ('driver_version: "470"\ncuda_version: "11.4"\ncolour: red\ngpus: []\n', ":3: unknown key 'colour'"),
        (
            'driver_version: "470"\ncuda_version: "11.4"\ngpus:\n  - name: T4\n    memory_mib: 1\n    pci_bus_id: zz\n',
            ":6: gpus[0].pci_bus_id: expected 'DDDDDDDD:BB:DD.F' (hex), got 'zz'",
        ),
        ('driver_version: "470"\ncuda_version: "11.4"\ngpus:\n\t- name: T4\n', ":4: tab character"),
    ],
)
def test_inventory_errors_name_the_line(tmp_path, seed_env, native_root, text, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    env = dict(seed_env, GPUSHARE_MOCK_INVENTORY=str(bad), NVIDIA_VISIBLE_DEVICES="all")
    env.pop("LD_PRELOAD")
    smi = run([tool(native_root, "nvidia-smi")], env)
    assert smi.returncode == 9  # the real tool's exit code when the driver cannot be reached
    assert f"gpushare-mock-nvml: {bad}{message}" in smi.stderr
    probe = run([tool(native_root, "gpushare-probe")], env)
    assert probe.returncode == 2 and f"gpushare-mock-cuda: {bad}{message}" in probe.stderr
    assert "CUDA_ERROR_NO_DEVICE" in probe.stdout


@pytest.mark.parametrize(("visible", "count"), [("all", 3), ("none", 0), ("void", 0), ("", 0), ("2,0", 2)])
def test_nvidia_visible_devices(seed_env, native_root, visible, count):
    env = dict(seed_env, NVIDIA_VISIBLE_DEVICES=visible)
    env.pop("LD_PRELOAD")
    out = run([tool(native_root, "nvidia-smi"), "-L"], env).stdout
    assert out.count("GPU ") == count or (count == 0 and out.strip() == "No devices were found")


def test_nvidia_visible_devices_by_uuid_keeps_listed_order(seed_env, native_root):
    env = dict(seed_env, NVIDIA_VISIBLE_DEVICES="all")
    env.pop("LD_PRELOAD")
    uuids = run([tool(native_root, "nvidia-smi"), "--query-gpu=uuid", "--format=csv,noheader"], env).stdout.split()
    assert len(set(uuids)) == 3
    env["NVIDIA_VISIBLE_DEVICES"] = f"{uuids[2]},{uuids[0]}"
    rows = run([tool(native_root, "nvidia-smi"), "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader"], env)
    assert rows.stdout.splitlines() == [f"0, {uuids[2]}, 00000000:00:0A.0", f"1, {uuids[0]}, 00000000:00:08.0"]
    env["NVIDIA_VISIBLE_DEVICES"] = "7"
    bad = run([tool(native_root, "nvidia-smi")], env)
    assert bad.returncode == 9 and "NVIDIA_VISIBLE_DEVICES='7': no card '7'" in bad.stderr


def test_cuda_visible_devices_narrows_the_container_view(bare_env, native_root):
    env = dict(bare_env, CUDA_VISIBLE_DEVICES="1,0,7,0")  # stops at the first invalid entry, as CUDA does
    raw = run([tool(native_root, "gpushare-probe"), "--raw"], env).stdout.splitlines()
    assert [line.split()[0] for line in raw] == ["device=0", "device=1"]
    assert "pci_bus_id=0000:00:0a.0" in raw[0] and "pci_bus_id=0000:00:09.0" in raw[1]
    none = run([tool(native_root, "gpushare-probe")], dict(bare_env, CUDA_VISIBLE_DEVICES=""))
    assert none.returncode == 2 and "CUDA_ERROR_NO_DEVICE" in none.stdout
