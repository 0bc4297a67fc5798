"""The seed's view (3 x V100 16160 MiB, cards 1 and 2 visible, 4 GiB each) end to end."""

from __future__ import annotations

import json
import re

from conftest import CONTEXT_MIB, PYTHON, run, tool
from gpushare_conformance.evidence.nvidia_smi import parse_nvidia_smi

PYNVML_SCRIPT = r"""
import json, pynvml
pynvml.nvmlInit()
out = {"driver": pynvml.nvmlSystemGetDriverVersion(), "cuda": pynvml.nvmlSystemGetCudaDriverVersion(),
       "count": pynvml.nvmlDeviceGetCount(), "cards": []}
for i in range(out["count"]):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    m1 = pynvml.nvmlDeviceGetMemoryInfo(h)
    m2 = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    pci = pynvml.nvmlDeviceGetPciInfo(h)
    uuid = pynvml.nvmlDeviceGetUUID(h)
    out["cards"].append({
        "name": pynvml.nvmlDeviceGetName(h), "uuid": uuid, "index": pynvml.nvmlDeviceGetIndex(h),
        "minor": pynvml.nvmlDeviceGetMinorNumber(h), "bus": pci.busId,
        "v1": [m1.total, m1.used, m1.free], "v2": [m2.total, m2.reserved, m2.used, m2.free],
        "by_uuid_index": pynvml.nvmlDeviceGetIndex(pynvml.nvmlDeviceGetHandleByUUID(uuid)),
        "by_bus_index": pynvml.nvmlDeviceGetIndex(pynvml.nvmlDeviceGetHandleByPciBusId(pci.busId)),
        "procs": len(pynvml.nvmlDeviceGetComputeRunningProcesses(h)),
    })
pynvml.nvmlShutdown()
print(json.dumps(out))
"""

GIB4 = 4096 << 20
PHYS = 16160 << 20
# What the probe is told is free on each card while it holds its context there, as TF
# prints it (two decimals of GiB): (4096 - 304) MiB = 3.70 GiB.
TF_FREE = f"{(4096 - CONTEXT_MIB) / 1024:.2f}GiB"


def test_nvidia_smi_table_shows_two_cards_of_4096mib(seed_env, native_root):
    proc = run([tool(native_root, "nvidia-smi")], seed_env)
    assert proc.returncode == 0, proc.stderr
    totals = re.findall(r"\|\s+(\d+)MiB /\s+(\d+)MiB \|", proc.stdout)
    assert totals == [("0", "4096"), ("0", "4096")]
    assert "| NVIDIA-SMI 470.82.01    Driver Version: 470.82.01    CUDA Version: 11.4     |" in proc.stdout
    report = parse_nvidia_smi(proc.stdout)
    assert [g.index for g in report.gpus] == [0, 1]
    assert [g.memory_total_mib for g in report.gpus] == [4096, 4096]
    assert [g.bus_id for g in report.gpus] == ["00000000:00:09.0", "00000000:00:0A.0"]
    assert report.driver_version == "470.82.01"


def test_nvidia_smi_on_path_is_the_mock(seed_env):
    proc = run(["nvidia-smi", "--query-gpu=index,memory.total", "--format=csv,noheader,nounits"], seed_env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["0, 4096", "1, 4096"]


def test_pynvml_agrees_with_nvidia_smi(seed_env):
    proc = run([PYTHON, "-c", PYNVML_SCRIPT], seed_env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["driver"] == "470.82.01" and out["cuda"] == 11040 and out["count"] == 2
    for i, card in enumerate(out["cards"]):
        assert card["name"] == "Tesla V100-SXM2-16GB"
        assert card["index"] == i and card["by_uuid_index"] == i and card["by_bus_index"] == i
        assert card["minor"] == i + 1  # /dev/nvidia1, /dev/nvidia2: the physical cards
        assert card["v1"] == [GIB4, 0, GIB4]
        total, reserved, used, free = card["v2"]
        assert total == GIB4 and used == 0 and free + used + reserved == total
        assert card["procs"] == 0
    assert [c["bus"] for c in out["cards"]] == ["00000000:00:09.0", "00000000:00:0A.0"]


def test_probe_prints_two_tf_blocks_of_4gib(seed_env, native_root):
    proc = run([tool(native_root, "gpushare-probe")], seed_env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}: I tensorflow/core/common_runtime/gpu/gpu_device\.cc:1030\] "
        r"Found device 0 with properties: ",
        lines[0],
    )
    assert lines[1:4] == [
        "name: Tesla V100-SXM2-16GB major: 7 minor: 0 memoryClockRate(GHz): 1.53",
        "pciBusID: 0000:00:09.0",
        f"totalMemory: 4.00GiB freeMemory: {TF_FREE}",
    ]
    assert lines[5:8] == [
        "name: Tesla V100-SXM2-16GB major: 7 minor: 0 memoryClockRate(GHz): 1.53",
        "pciBusID: 0000:00:0a.0",
        f"totalMemory: 4.00GiB freeMemory: {TF_FREE}",
    ]
    assert len(re.findall(r"^totalMemory: 4\.00GiB ", proc.stderr, re.M)) == 2


def test_3000_mib_allocates_and_5000_mib_fails(seed_env, native_root):
    probe = tool(native_root, "gpushare-probe")
    ok = run([probe, "--device", "1", "--alloc-mib", "3000"], seed_env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "allocated 1 x 3000 MiB on device 1" in ok.stdout
    too_big = run([probe, "--device", "0", "--alloc-mib", "5000"], seed_env)
    assert too_big.returncode == 2
    assert "CUDA_ERROR_OUT_OF_MEMORY" in too_big.stdout


def test_without_isolation_the_physical_card_shows(bare_env, native_root):
    smi = run([tool(native_root, "nvidia-smi"), "--query-gpu=memory.total", "--format=csv,noheader"], bare_env)
    assert smi.stdout.splitlines() == ["16160 MiB", "16160 MiB"]
    table = run([tool(native_root, "nvidia-smi")], bare_env)
    assert [g.memory_total_mib for g in parse_nvidia_smi(table.stdout).gpus] == [16160, 16160]
    probe = run([tool(native_root, "gpushare-probe")], bare_env)
    assert len(re.findall(r"^totalMemory: 15\.78GiB ", probe.stderr, re.M)) == 2
    assert run([tool(native_root, "gpushare-probe"), "--device", "0", "--alloc-mib", "5000"], bare_env).returncode == 0
    pynvml = json.loads(run([PYTHON, "-c", PYNVML_SCRIPT], bare_env).stdout)
    assert [c["v1"][0] for c in pynvml["cards"]] == [PHYS, PHYS]


def test_nvidia_smi_shows_usage_of_a_running_process(seed_env, native_root):
    """While a probe holds 1000 MiB on card 0, nvidia-smi in the same container sees it
    (and the context the probe holds there)."""
    import subprocess

    holder = subprocess.Popen(
        [tool(native_root, "gpushare-probe"), "--device", "0", "--alloc-mib", "1000", "--hold-seconds", "30"],
        env=seed_env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert "allocated" in holder.stdout.readline()
        proc = run(
            [
                tool(native_root, "nvidia-smi"),
                "--query-gpu=memory.used,memory.free,memory.total",
                "--format=csv,noheader,nounits",
            ],
            seed_env,
        )
        used = 1000 + CONTEXT_MIB  # its allocation and its context
        assert proc.stdout.splitlines() == [f"{used}, {4096 - used}, 4096", "0, 4096, 4096"]
        table = parse_nvidia_smi(run([tool(native_root, "nvidia-smi")], seed_env).stdout)
        assert [g.memory_used_mib for g in table.gpus] == [used, 0]
    finally:
        holder.kill()
        holder.wait()
