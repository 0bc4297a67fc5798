"""The mock NVML behaves like the real library: argument checks in the real order,
event waits that honour their timeout, values from the inventory's model profiles,
and the compute processes the mock CUDA records (also in nvidia-smi's table)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import PYTHON, run, tool
from gpushare_conformance import native
from gpushare_conformance.fixtures.inventory import parse_inventory_text

INVENTORY = """\
driver_version: "535.104.05"
gpus:
  - model: A100-SXM4-40GB
  - {model: T4, power_limit_w: 65, pci_bus_id: "0000:3b:00.0"}
  - name: Tesla V100-SXM2-16GB
    memory_mib: 16160
  - model: RTX-4090
"""


@pytest.fixture
def env(tmp_path, native_root) -> dict[str, str]:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(INVENTORY)
    return {
        "PATH": "/usr/bin:/bin",
        "GPUSHARE_MOCK_INVENTORY": str(inventory),
        "LD_LIBRARY_PATH": str(native.mock_lib_dir(native_root)),
        "GPUSHARE_MOCK_STATE_DIR": str(tmp_path),
    }


def py(env: dict[str, str], script: str, timeout: float = 60) -> dict:
    out = run([PYTHON, "-c", script], env, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


ORDER = r"""
import ctypes, json
lib = ctypes.CDLL("libnvidia-ml.so.1")
u = ctypes.c_uint()
buf = ctypes.create_string_buffer(64)
CALLS = {  # name -> call(handle, out pointer or None)
    "nvmlDeviceGetNvLinkState": lambda h, p: lib.nvmlDeviceGetNvLinkState(h, 0, p),          # generated stub
    "nvmlDeviceGetInforomImageVersion": lambda h, p: lib.nvmlDeviceGetInforomImageVersion(h, p and buf, 64),  # stub
    "nvmlDeviceGetPowerSource": lambda h, p: lib.nvmlDeviceGetPowerSource(h, p),            # stub
    "nvmlDeviceGetPowerUsage": lambda h, p: lib.nvmlDeviceGetPowerUsage(h, p),              # hand-written
    "nvmlDeviceGetMigMode": lambda h, p: lib.nvmlDeviceGetMigMode(h, p, p),                 # hand-written, per model
    "nvmlDeviceGetFanSpeed": lambda h, p: lib.nvmlDeviceGetFanSpeed(h, p),                  # hand-written, per model
}
out = {n: {} for n in CALLS}
for n, call in CALLS.items():
    out[n]["before_init_null"] = call(None, None)
lib.nvmlInit_v2()
h = ctypes.c_void_p()
lib.nvmlDeviceGetHandleByIndex_v2(1, ctypes.byref(h))  # the T4: no MIG, no fan
for n, call in CALLS.items():
    out[n]["bad_handle"] = call(ctypes.c_void_p(0x1234), ctypes.byref(u))
    out[n]["null_handle"] = call(None, ctypes.byref(u))
    out[n]["null_out"] = call(h, None)
    out[n]["valid"] = call(h, ctypes.byref(u))
print(json.dumps(out))
"""


def test_argument_checks_come_first_then_not_supported(env, native_root):
    stubs = (native_root / "gen" / "nvml_stubs.c").read_text()
    for generated in ("nvmlDeviceGetNvLinkState", "nvmlDeviceGetInforomImageVersion", "nvmlDeviceGetPowerSource"):
        assert f" {generated}(" in stubs
    out = py(env, ORDER)
    uninit, invalid, not_supported, success = 1, 2, 3, 0
    for name, codes in out.items():
        assert codes["before_init_null"] == uninit, name
        assert codes["bad_handle"] == invalid and codes["null_handle"] == invalid, name
        assert codes["null_out"] == invalid, name
    assert {n: c["valid"] for n, c in out.items()} == {
        "nvmlDeviceGetNvLinkState": not_supported,
        "nvmlDeviceGetInforomImageVersion": not_supported,
        "nvmlDeviceGetPowerSource": not_supported,
        "nvmlDeviceGetPowerUsage": success,
        "nvmlDeviceGetMigMode": not_supported,
        "nvmlDeviceGetFanSpeed": not_supported,
    }


EVENTS = r"""
import ctypes, json, time
lib = ctypes.CDLL("libnvidia-ml.so.1")
class EventData(ctypes.Structure):
    _fields_ = [("device", ctypes.c_void_p), ("eventType", ctypes.c_ulonglong), ("eventData", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]
out = {}
s = ctypes.c_void_p()
out["create_before_init"] = lib.nvmlEventSetCreate(ctypes.byref(s))
lib.nvmlInit_v2()
out["create_null"] = lib.nvmlEventSetCreate(None)
out["create"] = lib.nvmlEventSetCreate(ctypes.byref(s))
h = [ctypes.c_void_p() for _ in range(4)]
for i in range(4):
    lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h[i]))
types = ctypes.c_ulonglong()
out["supported"] = []
for i in range(4):
    lib.nvmlDeviceGetSupportedEventTypes(h[i], ctypes.byref(types))
    out["supported"].append(types.value)
out["register_pstate"] = lib.nvmlDeviceRegisterEvents(h[0], ctypes.c_ulonglong(0x4), s)
out["register_power_source"] = lib.nvmlDeviceRegisterEvents(h[0], ctypes.c_ulonglong(0x80), s)
out["register_bad_set"] = lib.nvmlDeviceRegisterEvents(h[0], ctypes.c_ulonglong(0x4), ctypes.c_void_p(0x1234))
d = EventData()
out["wait_null_data"] = lib.nvmlEventSetWait_v2(s, None, 10)
t = time.monotonic()
out["wait_v2"] = lib.nvmlEventSetWait_v2(s, ctypes.byref(d), 300)
out["wait_v2_s"] = time.monotonic() - t
t = time.monotonic()
out["wait_v1"] = lib.nvmlEventSetWait(s, ctypes.byref(d), 0)
out["wait_v1_s"] = time.monotonic() - t
out["free"] = lib.nvmlEventSetFree(s)
out["free_again"] = lib.nvmlEventSetFree(s)
print(json.dumps(out))
"""


def test_event_set_waits_out_its_timeout(env):
    out = py(env, EVENTS)
    assert out["create_before_init"] == 1 and out["create_null"] == 2 and out["create"] == 0
    ecc = 0x1 | 0x2
    a100, t4, v100, rtx = out["supported"]
    assert a100 & ecc == ecc and t4 & ecc == ecc and rtx & ecc == 0  # GeForce cards have no ECC
    assert all(s & 0x4 for s in out["supported"])  # P-state changes
    assert out["register_pstate"] == 0 and out["register_power_source"] == 3 and out["register_bad_set"] == 2
    assert out["wait_null_data"] == 2
    assert out["wait_v2"] == 10 and 0.28 <= out["wait_v2_s"] < 3  # NVML_ERROR_TIMEOUT after 300 ms
    assert out["wait_v1"] == 10 and out["wait_v1_s"] < 1
    assert out["free"] == 0 and out["free_again"] == 2


VALUES = r"""
import json, pynvml
pynvml.nvmlInit()
cards = []
def value(fn, *a):
    try:
        return fn(*a)
    except pynvml.NVMLError as e:
        return type(e).__name__
for i in range(pynvml.nvmlDeviceGetCount()):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    pci = pynvml.nvmlDeviceGetPciInfo(h)
    lo, hi = pynvml.nvmlDeviceGetPowerManagementLimitConstraints(h)
    cards.append({
        "name": pynvml.nvmlDeviceGetName(h), "uuid": pynvml.nvmlDeviceGetUUID(h),
        "memory_mib": pynvml.nvmlDeviceGetMemoryInfo(h).total >> 20,
        "pci_bus_id": pci.busId, "pci_device_id": pci.pciDeviceId, "pci_subsystem_id": pci.pciSubSystemId,
        "compute_capability": "%d.%d" % pynvml.nvmlDeviceGetCudaComputeCapability(h),
        "architecture": pynvml.nvmlDeviceGetArchitecture(h), "brand": pynvml.nvmlDeviceGetBrand(h),
        "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(h) // 1000,
        "power_default_w": pynvml.nvmlDeviceGetPowerManagementDefaultLimit(h) // 1000,
        "power_min_limit_w": lo // 1000, "power_max_limit_w": hi // 1000,
        "power_idle_w": pynvml.nvmlDeviceGetPowerUsage(h) // 1000,
        "clock_graphics_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_GRAPHICS),
        "clock_memory_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM),
        "clock_graphics_default_mhz": pynvml.nvmlDeviceGetDefaultApplicationsClock(h, pynvml.NVML_CLOCK_GRAPHICS),
        "clock_graphics_idle_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_GRAPHICS),
        "bar1_mib": pynvml.nvmlDeviceGetBAR1MemoryInfo(h).bar1Total >> 20,
        "pcie_generation": pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h),
        "pcie_width": pynvml.nvmlDeviceGetCurrPcieLinkWidth(h),
        "temp_slowdown_c": pynvml.nvmlDeviceGetTemperatureThreshold(h, pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
        "temp_shutdown_c": pynvml.nvmlDeviceGetTemperatureThreshold(h, pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
        "mig": value(pynvml.nvmlDeviceGetMigMode, h), "fan": value(pynvml.nvmlDeviceGetFanSpeed, h),
        "ecc": value(pynvml.nvmlDeviceGetEccMode, h),
        "throttle": pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h),
        "topology_0": pynvml.nvmlDeviceGetTopologyCommonAncestor(h, pynvml.nvmlDeviceGetHandleByIndex(0)),
    })
print(json.dumps(cards))
"""

ARCH = {"volta": 5, "turing": 6, "ampere": 7, "ada": 8, "hopper": 9}
BRAND = {"tesla": 2, "nvidia": 14, "geforce": 5}


def test_implemented_values_come_from_the_inventory_and_its_models(env):
    expected = parse_inventory_text(INVENTORY)["gpus"]
    got = py(env, VALUES)
    assert len(got) == len(expected) == 4
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        for key in (
            "name",
            "uuid",
            "memory_mib",
            "pci_bus_id",
            "pci_device_id",
            "pci_subsystem_id",
            "compute_capability",
            "power_limit_w",
            "power_min_limit_w",
            "power_max_limit_w",
            "power_idle_w",
            "clock_graphics_max_mhz",
            "clock_memory_max_mhz",
            "clock_graphics_default_mhz",
            "clock_graphics_idle_mhz",
            "bar1_mib",
            "pcie_generation",
            "pcie_width",
            "temp_slowdown_c",
            "temp_shutdown_c",
        ):
            assert g[key] == e[key], f"card {i} {key}"
        assert g["architecture"] == ARCH[e["architecture"]] and g["brand"] == BRAND[e["brand"]]
        assert g["power_default_w"] == e["power_limit_w"]
        assert (g["mig"] == [0, 0]) if e["mig"] else (g["mig"] == "NVMLError_NotSupported"), f"card {i} mig"
        assert (g["fan"] == e["fan_speed_percent"]) if e["fans"] else (g["fan"] == "NVMLError_NotSupported")
        assert (g["ecc"] == [1, 1]) if e["ecc"] else (g["ecc"] == "NVMLError_NotSupported")
        assert g["throttle"] == 0x1  # idle
        assert g["topology_0"] == (0 if i == 0 else 30)
    # what the inventory says wins over the model; the driver generation picks the total
    assert expected[1]["power_limit_w"] == 65 and got[1]["pci_bus_id"] == "00000000:3B:00.0"
    assert got[0]["memory_mib"] == 40960 and got[2]["memory_mib"] == 16160
    assert got[0]["name"] == "NVIDIA A100-SXM4-40GB" and got[2]["compute_capability"] == "7.0"


PROCS = r"""
import ctypes, json, sys
lib = ctypes.CDLL("libnvidia-ml.so.1")
class P1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong)]
class P2(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong), ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]
lib.nvmlInit_v2()
h = ctypes.c_void_p()
lib.nvmlDeviceGetHandleByIndex_v2(int(sys.argv[1]), ctypes.byref(h))
out = {}
n = ctypes.c_uint(0)
out["size_query"] = [lib.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), None), n.value]
v1 = (P1 * 8)(); n.value = 8
out["v1"] = [lib.nvmlDeviceGetComputeRunningProcesses(h, ctypes.byref(n), v1), [[p.pid, p.used] for p in v1[:n.value]]]
v2 = (P2 * 8)(); n.value = 8
out["v2"] = [lib.nvmlDeviceGetComputeRunningProcesses_v2(h, ctypes.byref(n), v2),
             [[p.pid, p.used, p.gi] for p in v2[:n.value]]]
v3 = (P2 * 8)(); n.value = 8
out["v3"] = [lib.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), v3), [[p.pid, p.used] for p in v3[:n.value]]]
n.value = 8
out["graphics"] = [lib.nvmlDeviceGetGraphicsRunningProcesses_v3(h, ctypes.byref(n), v3), n.value]
n.value = 8
out["mps"] = [lib.nvmlDeviceGetMPSComputeRunningProcesses_v3(h, ctypes.byref(n), v3), n.value]
print(json.dumps(out))
"""


def test_no_processes_on_an_idle_card(env):
    out = py(env, PROCS.replace("sys.argv[1]", "0"))
    assert out["size_query"] == [0, 0] and out["v1"] == [0, []] and out["v3"] == [0, []]
    assert out["graphics"] == [0, 0] and out["mps"] == [0, 0]


HOLDER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "gpu_process_table.h"
int main(int argc, char **argv) {  /* hold MiB on a physical card in the node's table */
    if (gpt_set_used((unsigned)atoi(argv[1]), strtoull(argv[2], NULL, 10) << 20) != 0) return 1;
    printf("ready\n");
    fflush(stdout);
    sleep(60);
    return 0;
}
"""


@pytest.fixture
def holder(tmp_path, env):
    """Start processes that hold memory in the node's process table (as the mock CUDA does)."""
    import subprocess

    src = native.source_dir() / "src"
    exe = tmp_path / "gpt-holder"
    (tmp_path / "holder.c").write_text(HOLDER)
    subprocess.run(
        [
            "gcc",
            "-std=gnu11",
            "-D_GNU_SOURCE",
            f"-I{src}",
            "-o",
            str(exe),
            str(tmp_path / "holder.c"),
            str(src / "gpu_process_table.c"),
            "-lpthread",
        ],
        check=True,
    )
    procs = []

    def start(card: int, mib: int) -> int:
        p = subprocess.Popen([str(exe), str(card), str(mib)], env=env, stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        procs.append(p)
        return p.pid

    yield start
    for p in procs:
        p.kill()
        p.wait()


def test_processes_in_the_table_are_listed_by_nvml_and_nvidia_smi(env, native_root, holder):
    a = holder(1, 1000)
    b = holder(1, 300)
    other = holder(3, 50)
    out = py(env, PROCS.replace("sys.argv[1]", "1"))
    assert out["size_query"] == [7, 2]  # NVML_ERROR_INSUFFICIENT_SIZE and the count
    assert sorted(out["v3"][1]) == sorted([[a, 1000 << 20], [b, 300 << 20]])
    assert out["v1"] == out["v3"] and all(p[2] == 0xFFFFFFFF for p in out["v2"][1])
    assert out["graphics"] == [0, 0] and out["mps"] == [0, 0]
    mem = py(
        env,
        "import pynvml, json; pynvml.nvmlInit(); "
        "print(json.dumps([pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).used >> 20 "
        "for i in range(4)]))",
    )
    assert mem == [0, 1300, 0, 50]
    smi = run([tool(native_root, "nvidia-smi")], env).stdout
    rows = {pid: [line for line in smi.splitlines() if f" {pid} " in line and "MiB |" in line] for pid in (a, b, other)}
    assert len(rows[a]) == 1 and rows[a][0].startswith("|    1 ") and "gpt-holder" in rows[a][0]
    assert rows[a][0].endswith(" 1000MiB |") and rows[b][0].endswith(" 300MiB |")
    assert rows[other][0].startswith("|    3 ") and "No running processes found" not in smi
    width = {len(line) for line in smi.splitlines() if line.startswith("|")}
    assert width == {89}  # the 535 layout, process rows included
    # a container that sees only card 3 lists only its process, renumbered
    visible = run([tool(native_root, "nvidia-smi")], dict(env, NVIDIA_VISIBLE_DEVICES="3")).stdout
    assert f" {other} " in visible and f" {a} " not in visible


def test_mock_cuda_processes_show_up(env, native_root):
    cuda_sources = [p for p in (native.source_dir() / "src").glob("*.c") if p.name != "gpu_process_table.c"]
    if not any("gpt_set_used" in p.read_text() for p in cuda_sources):
        pytest.skip("the mock CUDA does not record its processes in the process table yet")
    import subprocess

    probe = subprocess.Popen(
        [tool(native_root, "gpushare-probe"), "--device", "1", "--alloc-mib", "1000", "--hold-seconds", "20"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # Its context shows from cuCtxCreate on, its 1000 MiB once it says it allocated.
        assert "allocated" in probe.stdout.readline()
        out = py(env, PROCS.replace("sys.argv[1]", "1"))
        pids = {p[0]: p[1] for p in out["v3"][1]}
        assert probe.pid in pids and pids[probe.pid] >= 1000 << 20, out
        smi = run([tool(native_root, "nvidia-smi")], env).stdout
        rows = [line for line in smi.splitlines() if f" {probe.pid} " in line]
        assert len(rows) == 1 and "gpushare-probe" in rows[0], smi
    finally:
        probe.kill()
        probe.wait()


# The T4 (card 1) has fallen off the bus.
LOST_INVENTORY = INVENTORY.replace('pci_bus_id: "0000:3b:00.0"}', 'pci_bus_id: "0000:3b:00.0", lost: true}')

LOOKUPS = r"""
import json, sys, pynvml
def code(fn, *a):
    try:
        fn(*a)
        return "ok"
    except pynvml.NVMLError as e:
        return type(e).__name__
pynvml.nvmlInit()
out = {"count": pynvml.nvmlDeviceGetCount(), "index": [], "uuid": [], "bus_id": [], "bus_id_4": [], "serial": []}
for i, card in enumerate(json.loads(sys.argv[1])):
    out["index"].append(code(pynvml.nvmlDeviceGetHandleByIndex, i))
    out["uuid"].append(code(pynvml.nvmlDeviceGetHandleByUUID, card["uuid"]))
    out["bus_id"].append(code(pynvml.nvmlDeviceGetHandleByPciBusId, card["pci_bus_id"]))
    out["bus_id_4"].append(code(pynvml.nvmlDeviceGetHandleByPciBusId, card["pci_bus_id"][4:]))
    out["serial"].append(code(pynvml.nvmlDeviceGetHandleBySerial, "%013d" % (1320000000 + i)))
print(json.dumps(out))
"""


def test_a_lost_card_is_counted_but_gives_no_handle(env):
    Path(env["GPUSHARE_MOCK_INVENTORY"]).write_text(LOST_INVENTORY)
    cards = parse_inventory_text(LOST_INVENTORY)["gpus"]
    assert [g["lost"] for g in cards] == [False, True, False, False]
    out = py(env, LOOKUPS.replace("sys.argv[1]", repr(json.dumps(cards))))
    assert out.pop("count") == 4  # as a real driver counts a card that fell off the bus
    lost = ["ok", "NVMLError_GpuIsLost", "ok", "ok"]
    assert out == {"index": lost, "uuid": lost, "bus_id": lost, "bus_id_4": lost, "serial": lost}


POLLS = r"""
import json, os, sys, pynvml
path, texts = sys.argv[1], json.loads(sys.argv[2])
def poll():  # as the device plugin's health check: init, look at every card, shut down
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return type(e).__name__
    try:
        seen = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            try:
                pynvml.nvmlDeviceGetHandleByIndex(i)
                seen.append("ok")
            except pynvml.NVMLError_GpuIsLost:
                seen.append("lost")
        return seen
    finally:
        pynvml.nvmlShutdown()
def rewrite(key):  # in place: the same inode, read by the next init
    inode = os.stat(path).st_ino
    with open(path, "r+") as f:
        f.write(texts[key])
        f.truncate()
    assert os.stat(path).st_ino == inode
out = [poll()]
rewrite("lost")
out.append(poll())
rewrite("back")
out.append(poll())
pynvml.nvmlInit()  # a reference held across the rewrite keeps its cards, and sees one fall off the bus
rewrite("lost")
out.append(poll())
pynvml.nvmlShutdown()
out.append(poll())
rewrite("broken")
out.append(poll())
rewrite("back")
out.append(poll())
print(json.dumps(out))
"""


def test_each_first_init_rereads_the_inventory(env):
    texts = {"lost": LOST_INVENTORY, "back": LOST_INVENTORY.replace("lost: true", "lost: false"), "broken": "gpus: ["}
    out = run([PYTHON, "-c", POLLS, env["GPUSHARE_MOCK_INVENTORY"], json.dumps(texts)], env)
    assert out.returncode == 0, out.stderr
    ok, lost = ["ok"] * 4, ["ok", "lost", "ok", "ok"]
    assert json.loads(out.stdout) == [ok, lost, ok, lost, lost, "NVMLError_DriverNotLoaded", ok]
    assert "gpushare-mock-nvml: " in out.stderr and "YAML syntax error" in out.stderr


XID_EVENTS = r"""
import ctypes, json, sys, time
from pathlib import Path
lib = ctypes.CDLL("libnvidia-ml.so.1")
class EventData(ctypes.Structure):
    _fields_ = [("device", ctypes.c_void_p), ("eventType", ctypes.c_ulonglong), ("eventData", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]
inventory = Path(sys.argv[1])
base = 'driver_version: "535.104.05"\ngpus:\n' + "  - model: T4\n" * 4
def card_xid(card, xid):
    lines = base.splitlines()
    lines.insert(2 + card + 1, f"    xid: {xid}")
    inventory.write_text("\n".join(lines) + "\n")
inventory.write_text(base)
lib.nvmlInit_v2()
h = [ctypes.c_void_p() for _ in range(4)]
for i in range(4):
    lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h[i]))
XID, PSTATE = ctypes.c_ulonglong(0x8), ctypes.c_ulonglong(0x4)
card_xid(2, 79)  # already there when the sets register: old news
a, b, other = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
for s in (a, b, other):
    lib.nvmlEventSetCreate(ctypes.byref(s))
for i in range(4):
    lib.nvmlDeviceRegisterEvents(h[i], XID, a)
lib.nvmlDeviceRegisterEvents(h[1], XID, b)
lib.nvmlDeviceRegisterEvents(h[1], PSTATE, other)
def wait(s, ms):
    d = EventData()
    t = time.monotonic()
    rc = lib.nvmlEventSetWait_v2(s, ctypes.byref(d), ms)
    card = next((i for i in range(4) if h[i].value == d.device), None)
    return {"rc": rc, "s": time.monotonic() - t, "card": card, "type": d.eventType, "xid": d.eventData,
            "gi": d.gpuInstanceId, "ci": d.computeInstanceId}
out = {"old_news": wait(a, 200)}
card_xid(1, 48)
out["a"], out["a_again"] = wait(a, 2000), wait(a, 200)
out["b"], out["other"] = wait(b, 2000), wait(other, 300)
card_xid(1, 43)
out["a_43"] = wait(a, 2000)
inventory.write_text(base)  # cleared: nothing to report
out["cleared"] = wait(a, 300)
card_xid(1, 48)
out["again_48"] = wait(a, 0)  # already there: a zero timeout still delivers it
t = time.monotonic()
import threading
threading.Timer(0.5, lambda: card_xid(3, 31)).start()
out["waiting"] = wait(a, 5000)
print(json.dumps(out))
"""


def test_an_xid_in_the_inventory_reaches_every_set_registered_for_it_once(env):
    """A change of a card's ``xid:`` is one nvmlEventTypeXidCriticalError event per set
    registered for it on that card, with that card's handle and the Xid, as the real
    driver reports an Xid; old news, a cleared Xid and other sets get nothing."""
    out = py(env, XID_EVENTS.replace("sys.argv[1]", repr(env["GPUSHARE_MOCK_INVENTORY"])))
    timeout = 10  # NVML_ERROR_TIMEOUT
    assert out["old_news"]["rc"] == timeout and out["old_news"]["s"] >= 0.18
    assert {k: out["a"][k] for k in ("rc", "card", "type", "xid", "gi", "ci")} == {
        "rc": 0,
        "card": 1,
        "type": 0x8,
        "xid": 48,
        "gi": 0xFFFFFFFF,
        "ci": 0xFFFFFFFF,
    }
    assert out["a"]["s"] < 1  # delivered as it happens, not at the timeout
    assert out["a_again"]["rc"] == timeout  # once per change
    assert (out["b"]["rc"], out["b"]["card"], out["b"]["xid"]) == (0, 1, 48)
    assert out["other"]["rc"] == timeout  # registered for P-state changes only
    assert (out["a_43"]["rc"], out["a_43"]["card"], out["a_43"]["xid"]) == (0, 1, 43)
    assert out["cleared"]["rc"] == timeout
    assert (out["again_48"]["rc"], out["again_48"]["xid"]) == (0, 48)
    w = out["waiting"]
    assert (w["rc"], w["card"], w["xid"]) == (0, 3, 31) and 0.4 <= w["s"] < 2  # raised mid-wait
