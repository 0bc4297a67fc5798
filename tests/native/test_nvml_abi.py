"""The mock NVML exports the whole nvml.h ABI, and every call pynvml wraps survives.

The header is read here on its own (not through native/gen-nvml-stubs.py), so a
generator that misses a declaration fails this test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import PYTHON, SEED_INVENTORY, run
from gpushare_conformance import native

DECLARED = re.compile(r"\bDECLDIR\s+(?:\w+\s*\**\s*)?(nvml\w+)\s*\(")
ALIAS = re.compile(r"^\s*#\s*define\s+(nvml\w+)\s+(nvml\w+)\s*$", re.M)


def nvml_header() -> Path:
    import subprocess

    found = subprocess.run(
        [str(native.source_dir() / "find-headers.sh"), "nvml"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return Path(found) / "nvml.h"


def header_names() -> set[str]:
    """Every declared function (both sides of NVML_NO_UNVERSIONED_FUNC_DEFS) and every
    legacy name the header #defines to a declared function."""
    text = nvml_header().read_text()
    declared = set(DECLARED.findall(text))
    aliases = {a for a, b in ALIAS.findall(text) if b in declared}
    return declared | aliases


@pytest.fixture
def env(tmp_path, native_root) -> dict[str, str]:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(SEED_INVENTORY)
    return {
        "PATH": "/usr/bin:/bin",
        "GPUSHARE_MOCK_INVENTORY": str(inventory),
        "LD_LIBRARY_PATH": str(native.mock_lib_dir(native_root)),
        "GPUSHARE_MOCK_STATE_DIR": str(tmp_path),
    }


def test_header_parse_finds_the_known_generations():
    names = header_names()
    assert len(names) > 300
    # legacy and versioned names, and a legacy alias to a renamed function
    assert {
        "nvmlInit",
        "nvmlInit_v2",
        "nvmlDeviceGetPciInfo",
        "nvmlDeviceGetPciInfo_v2",
        "nvmlDeviceGetPciInfo_v3",
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlEventSetWait",
        "nvmlEventSetWait_v2",
        "nvmlGetBlacklistDeviceCount",
    } <= names


def test_every_declared_function_resolves_in_the_mock(env, native_root):
    names = sorted(header_names())
    script = (
        "import ctypes, json, sys\n"
        "lib = ctypes.CDLL('libnvidia-ml.so.1')\n"
        "missing = [n for n in json.loads(sys.argv[1]) if not hasattr(lib, n)]\n"
        "print(json.dumps(missing))\n"
    )
    out = run([PYTHON, "-c", script, json.dumps(names)], env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [], "declared in nvml.h but not exported by the mock"


def test_the_mock_exports_nothing_outside_the_header(native_root):
    import subprocess

    lib = native.lib_dir(native_root) / "libnvidia-ml.so.1"
    dyn = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in dyn.splitlines() if line.split()[-2] in ("T", "W")}
    assert exported - header_names() == set(), "exported but not declared (libyaml or helpers leaking?)"
    assert not [s for s in exported if s.startswith("yaml_")]


def test_hand_written_functions_win_over_generated_stubs(native_root):
    stubs = (native_root / "gen" / "nvml_stubs.c").read_text()
    defined = set(re.findall(r"^EXPORT nvmlReturn_t (nvml\w+)\(", stubs, re.M))
    assert defined, "no generated stubs"
    for name in (
        "nvmlDeviceGetName",
        "nvmlDeviceGetMemoryInfo",
        "nvmlEventSetWait_v2",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetClockInfo",
    ):
        assert name not in defined
    assert "nvmlDeviceGetNvLinkState" in defined  # a feature the mock cards lack


SWEEP = r"""
import inspect, json, sys, pynvml
absent = set()  # C names pynvml asked for and the library lacks
lookup = pynvml._nvmlGetFunctionPointer
def recording(name):
    try:
        return lookup(name)
    except pynvml.NVMLError_FunctionNotFound:
        absent.add(name)
        raise
pynvml._nvmlGetFunctionPointer = recording
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
h2 = pynvml.nvmlDeviceGetHandleByIndex(1)
uuid = pynvml.nvmlDeviceGetUUID(h)
serial = pynvml.nvmlDeviceGetSerial(h)
bus = pynvml.nvmlDeviceGetPciInfo(h).busId
SPECIAL = {"nvmlDeviceGetHandleByUUID": (uuid,), "nvmlDeviceGetHandleBySerial": (serial,),
           "nvmlDeviceGetHandleByPciBusId": (bus,), "nvmlDeviceGetHandleByIndex": (0,),
           "nvmlDeviceGetTopologyCommonAncestor": (h, h2), "nvmlDeviceGetP2PStatus": (h, h2, 0),
           "nvmlDeviceGetTopologyNearestGpus": (h, 0)}
def arg(p):
    n = p.name.lower()
    if n in ("handle", "device", "handle1", "device1", "gpu"): return h
    if n in ("handle2", "device2"): return h2
    return 0
out = {}
for name in sorted(dir(pynvml)):
    fn = getattr(pynvml, name)
    if not name.startswith("nvmlDeviceGet") or not callable(fn):
        continue
    try:
        sig = inspect.signature(fn)
        args = SPECIAL.get(name) or tuple(arg(p) for p in sig.parameters.values() if p.default is p.empty
                                          and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    except (TypeError, ValueError):
        args = (h,)
    print(name, file=sys.stderr, flush=True)  # the last name names a crash
    try:
        fn(*args)
        out[name] = "ok"
    except pynvml.NVMLError as e:
        out[name] = type(e).__name__
    except Exception as e:  # a wrapper's own Python error, not the library's
        out[name] = "python:" + type(e).__name__
pynvml.nvmlShutdown()
print(json.dumps({"results": out, "absent": sorted(absent)}))
"""


def test_pynvml_calls_every_device_query_without_crashing(env):
    out = run([PYTHON, "-c", SWEEP], env, timeout=120)
    last = out.stderr.strip().splitlines()[-1:] or ["?"]
    assert out.returncode == 0, f"crashed (rc {out.returncode}) in {last[0]}"
    sweep = json.loads(out.stdout)
    results = sweep["results"]
    # pynvml may wrap functions newer than the header the mock is built against: those
    # are absent from a real driver of that generation too.  Any declared one is a bug.
    assert sorted(set(sweep["absent"]) & header_names()) == [], "declared in nvml.h, missing in the mock"
    assert sorted(n for n, r in results.items() if r == "NVMLError_Unknown") == []
    assert len(results) > 100
    ok = {n for n, r in results.items() if r == "ok"}
    # the queries the mock implements succeed through pynvml's own structures
    assert {
        "nvmlDeviceGetName",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetPciInfo",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetPowerManagementLimitConstraints",
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetTemperatureThreshold",
        "nvmlDeviceGetArchitecture",
        "nvmlDeviceGetCurrPcieLinkGeneration",
        "nvmlDeviceGetEncoderUtilization",
    } <= ok
    assert results["nvmlDeviceGetNvLinkState"] == "NVMLError_NotSupported"
