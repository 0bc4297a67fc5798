"""The mock libcuda.so.1 is the whole driver API of the pinned cuda.h: every declared
name resolves (dlsym and cuGetProcAddress, with the driver's version and stream
rules), unimplemented entry points answer with the driver's codes, and the
implemented ones behave (contexts, streams, memory of every kind, copies)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import PYTHON, run
from gpushare_conformance import native

CUDA_SUCCESS, INVALID_VALUE, OUT_OF_MEMORY, NOT_INITIALIZED = 0, 1, 2, 3
INVALID_CONTEXT, INVALID_HANDLE, NOT_FOUND, NOT_SUPPORTED = 201, 400, 500, 801


def cuda_h() -> Path:
    out = run(["sh", str(native.source_dir() / "find-headers.sh"), "cuda"], dict(__import__("os").environ))
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip()) / "cuda.h"


def declared_names(text: str) -> set[str]:
    """Every name a program compiled against cuda.h can bind to, read straight from the
    header (not from the generator): declared functions, and the targets of the
    versioning macros with their per-thread-stream forms."""
    names = set(re.findall(r"\bCUresult\s+CUDAAPI\s+(cu\w+)\s*\(", text))
    for target in re.findall(r"^\s*#define\s+cu\w+\s+(?:__CUDA_API_PT(?:DS|SZ)\()?(cu\w+)", text, re.M):
        names.add(target)
    for kind, target in re.findall(r"__CUDA_API_(PTDS|PTSZ)\((cu\w+)\)", text):
        names.add(f"{target}_{kind.lower()}")
    names.discard("cuGetProcAddress_v2_ptsz")  # an inline wrapper in the header, not an export
    return names


def ctypes_run(env: dict[str, str], body: str) -> dict:
    script = "import ctypes, json\nlib = ctypes.CDLL('libcuda.so.1')\nout = {}\n" + body + "\nprint(json.dumps(out))\n"
    proc = run([PYTHON, "-c", script], env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_function_cuda_h_declares_resolves(bare_env):
    names = sorted(declared_names(cuda_h().read_text()))
    assert len(names) > 500, f"parsed only {len(names)} names from cuda.h"
    out = ctypes_run(
        bare_env,
        f"""
names = {names!r}
fn = ctypes.c_void_p()
status = ctypes.c_int()
out["no_symbol"] = [n for n in names if not hasattr(lib, n)]
out["no_proc"] = [n for n in names if lib.cuGetProcAddress_v2(n.encode(), ctypes.byref(fn), 12090, 0, ctypes.byref(status)) != 0
                  or not fn.value]
""",
    )
    assert out["no_symbol"] == [], f"{len(out['no_symbol'])} names missing: {out['no_symbol'][:20]}"
    assert out["no_proc"] == [], f"cuGetProcAddress cannot resolve: {out['no_proc'][:20]}"


def test_unimplemented_entry_points_answer_like_the_driver(bare_env):
    out = ctypes_run(
        bare_env,
        """
m = ctypes.c_void_p()
out["before_init"] = lib.cuModuleLoad(ctypes.byref(m), b"x.cubin")
out["graph_before_init"] = lib.cuGraphCreate(ctypes.byref(m), 0)
lib.cuInit(0)
ctx = ctypes.c_void_p()
lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0); lib.cuCtxSetCurrent(ctx)
out["module_null_out"] = lib.cuModuleLoad(None, b"x.cubin")
out["module"] = lib.cuModuleLoad(ctypes.byref(m), b"x.cubin")
out["graph_null_out"] = lib.cuGraphCreate(None, 0)
out["graph"] = lib.cuGraphCreate(ctypes.byref(m), 0)
out["launch"] = lib.cuLaunchKernel(None, 1, 1, 1, 1, 1, 1, 0, None, None, None)
out["library"] = lib.cuLibraryLoadFromFile(ctypes.byref(m), b"x", None, None, 0, None, None, 0)
""",
    )
    assert out["before_init"] == NOT_INITIALIZED and out["graph_before_init"] == NOT_INITIALIZED
    assert out["module_null_out"] == INVALID_VALUE and out["graph_null_out"] == INVALID_VALUE
    assert out["module"] == NOT_SUPPORTED and out["graph"] == NOT_SUPPORTED
    assert out["launch"] == NOT_SUPPORTED and out["library"] == NOT_SUPPORTED


def test_get_proc_address_follows_versions_and_stream_flags(bare_env):
    out = ctypes_run(
        bare_env,
        """
def proc(name, version, flags=0):
    fn = ctypes.c_void_p(); st = ctypes.c_int(-1)
    rc = lib.cuGetProcAddress_v2(name.encode(), ctypes.byref(fn), version, flags, ctypes.byref(st))
    return [rc, fn.value, st.value]
def addr(name):
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
checks = {
  "alloc_3020": (proc("cuMemAlloc", 3020), "cuMemAlloc_v2"),
  "alloc_2000": (proc("cuMemAlloc", 2000), "cuMemAlloc"),
  "htod_ptds": (proc("cuMemcpyHtoD", 12000, 2), "cuMemcpyHtoD_v2_ptds"),
  "htod_legacy": (proc("cuMemcpyHtoD", 12000, 1), "cuMemcpyHtoD_v2"),
  "async_ptsz": (proc("cuMemAllocAsync", 12000, 2), "cuMemAllocAsync_ptsz"),
  "async": (proc("cuMemAllocAsync", 12000, 0), "cuMemAllocAsync"),
  "ctx_create_12050": (proc("cuCtxCreate", 12050), "cuCtxCreate_v4"),
  "release_11000": (proc("cuDevicePrimaryCtxRelease", 11000), "cuDevicePrimaryCtxRelease_v2"),
  "versioned_name": (proc("cuMemAlloc_v2", 12000), "cuMemAlloc_v2"),
  "no_ptds_variant": (proc("cuMemAlloc", 12000, 2), "cuMemAlloc_v2"),
}
out["matches"] = {k: [v[0], v[2], v[1] == addr(n)] for k, (v, n) in checks.items()}
out["too_old"] = proc("cuMemAllocAsync", 11000)
out["unknown"] = proc("cuNoSuchEntryPoint", 12000)
out["bad_flags"] = proc("cuMemAlloc", 12000, 8)[0]
""",
    )
    for key, (rc, status, same) in out["matches"].items():
        assert rc == CUDA_SUCCESS and status == 0 and same, f"{key}: rc={rc} status={status} right function={same}"
    assert out["too_old"][0] == NOT_FOUND and out["too_old"][2] == 2  # VERSION_NOT_SUFFICIENT
    assert out["unknown"][0] == NOT_FOUND and out["unknown"][2] == 1  # SYMBOL_NOT_FOUND
    assert out["bad_flags"] == INVALID_VALUE


PRELUDE = """
lib.cuInit(0)
ctx = ctypes.c_void_p()
assert lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0 and lib.cuCtxSetCurrent(ctx) == 0
U64 = ctypes.c_uint64
def info():
    f = ctypes.c_size_t(); t = ctypes.c_size_t()
    assert lib.cuMemGetInfo_v2(ctypes.byref(f), ctypes.byref(t)) == 0
    return t.value - f.value
def pool_attr(pool, attr):
    v = U64(); assert lib.cuMemPoolGetAttribute(pool, attr, ctypes.byref(v)) == 0; return v.value
"""


def test_copies_and_sets_read_back_on_every_kind_of_device_memory(bare_env):
    out = ctypes_run(
        bare_env,
        PRELUDE
        + """
n = 1 << 16
data = bytes(range(256)) * (n // 256)
back = ctypes.create_string_buffer(n)
a, b = U64(), U64()
assert lib.cuMemAlloc_v2(ctypes.byref(a), n) == 0 and lib.cuMemAllocManaged(ctypes.byref(b), n, 1) == 0
out["htod"] = lib.cuMemcpyHtoD_v2(a, data, n)
out["dtod"] = lib.cuMemcpyDtoD_v2(b, a, n)
out["dtoh"] = lib.cuMemcpyDtoH_v2(back, b, n)
out["round_trip"] = back.raw == data
out["interior"] = lib.cuMemcpyDtoH_v2(back, U64(a.value + 100), 8) == 0 and back.raw[:8] == data[100:108]
out["memset32"] = lib.cuMemsetD32_v2(a, 0xA1B2C3D4, n // 4)
lib.cuMemcpyDtoH_v2(back, a, 8)
out["memset_back"] = back.raw[:8].hex()
s = ctypes.c_void_p()
assert lib.cuStreamCreate(ctypes.byref(s), 0) == 0
p = U64()
out["pool_alloc"] = lib.cuMemAllocAsync(ctypes.byref(p), n, s)
out["async_copy"] = lib.cuMemcpyHtoDAsync_v2(p, data, n, s)
lib.cuStreamSynchronize(s)
lib.cuMemcpyDtoH_v2(back, p, n)
out["pool_round_trip"] = back.raw == data
out["past_end"] = lib.cuMemcpyHtoD_v2(U64(a.value + n - 4), data, 8)
out["unknown_pointer"] = lib.cuMemcpyDtoH_v2(back, U64(0x1000), 8)
out["bad_stream"] = lib.cuMemcpyHtoDAsync_v2(p, data, 8, ctypes.c_void_p(0xdead0))
out["unaligned_d32"] = lib.cuMemsetD32_v2(U64(a.value + 1), 0, 1)
out["frees"] = [lib.cuMemFreeAsync(p, s), lib.cuMemFree_v2(a), lib.cuMemFree_v2(b), lib.cuStreamDestroy_v2(s)]
out["double_free"] = lib.cuMemFree_v2(a)
""",
    )
    assert out["htod"] == out["dtod"] == out["dtoh"] == 0 and out["round_trip"] and out["interior"]
    assert out["memset32"] == 0 and out["memset_back"] == "d4c3b2a1d4c3b2a1"
    assert out["pool_alloc"] == 0 and out["async_copy"] == 0 and out["pool_round_trip"]
    assert out["past_end"] == INVALID_VALUE and out["unknown_pointer"] == INVALID_VALUE
    assert out["bad_stream"] == INVALID_HANDLE and out["unaligned_d32"] == INVALID_VALUE
    assert out["frees"] == [0, 0, 0, 0] and out["double_free"] == INVALID_VALUE


def test_virtual_memory_counts_the_physical_allocation_and_maps_shared_bytes(bare_env):
    out = ctypes_run(
        bare_env,
        PRELUDE
        + """
class Loc(ctypes.Structure): _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]
class Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", Loc),
                ("win32", ctypes.c_void_p), ("compression", ctypes.c_ubyte), ("gpuDirect", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]
class Access(ctypes.Structure): _fields_ = [("location", Loc), ("flags", ctypes.c_int)]
prop = Prop(type=1, location=Loc(1, 0))
g = ctypes.c_size_t()
out["granularity"] = [lib.cuMemGetAllocationGranularity(ctypes.byref(g), ctypes.byref(prop), 0), g.value]
size = 64 * g.value
base0 = info()
va1, va2 = U64(), U64()
assert lib.cuMemAddressReserve(ctypes.byref(va1), size, 0, U64(0), 0) == 0
assert lib.cuMemAddressReserve(ctypes.byref(va2), size, 0, U64(0), 0) == 0
out["reserve_counts"] = info() - base0
h = U64()
out["create"] = lib.cuMemCreate(ctypes.byref(h), size, ctypes.byref(prop), 0)
out["create_counts"] = info() - base0
acc = Access(Loc(1, 0), 3)
out["map"] = [lib.cuMemMap(va1, size, 0, h, 0), lib.cuMemMap(va2, size, 0, h, 0),
              lib.cuMemSetAccess(va1, size, ctypes.byref(acc), 1), lib.cuMemSetAccess(va2, size, ctypes.byref(acc), 1)]
lib.cuMemcpyHtoD_v2(va1, b"shared bytes", 12)
back = ctypes.create_string_buffer(12)
lib.cuMemcpyDtoH_v2(back, va2, 12)
out["shared"] = back.raw == b"shared bytes"
out["release_while_mapped"] = lib.cuMemRelease(h)
out["still_counted"] = info() - base0
out["unmap"] = [lib.cuMemUnmap(va1, size), lib.cuMemUnmap(va2, size)]
out["freed"] = info() - base0
out["address_free"] = [lib.cuMemAddressFree(va1, size), lib.cuMemAddressFree(va2, size)]
out["bad_size"] = lib.cuMemCreate(ctypes.byref(h), g.value + 1, ctypes.byref(prop), 0)
out["too_big"] = lib.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(1 << 40), ctypes.byref(prop), 0)
""",
    )
    gran = out["granularity"][1]
    size = 64 * gran
    assert out["granularity"][0] == 0 and gran > 0
    assert out["reserve_counts"] == 0, "an address reservation is not device memory"
    assert out["create"] == 0 and out["create_counts"] == size
    assert out["map"] == [0, 0, 0, 0] and out["shared"]
    assert out["release_while_mapped"] == 0 and out["still_counted"] == size, "mapped memory stays allocated"
    assert out["unmap"] == [0, 0] and out["freed"] == 0 and out["address_free"] == [0, 0]
    assert out["bad_size"] == INVALID_VALUE and out["too_big"] == OUT_OF_MEMORY


def test_pools_charge_the_card_for_what_they_hold(bare_env):
    out = ctypes_run(
        bare_env,
        PRELUDE
        + """
RES, USED, THRESHOLD = 5, 7, 4  # CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, USED_MEM_CURRENT, RELEASE_THRESHOLD
class Loc(ctypes.Structure): _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]
class Props(ctypes.Structure):
    _fields_ = [("allocType", ctypes.c_int), ("handleTypes", ctypes.c_int), ("location", Loc),
                ("win32", ctypes.c_void_p), ("maxSize", ctypes.c_size_t), ("usage", ctypes.c_ushort),
                ("reserved", ctypes.c_ubyte * 54)]
pool = ctypes.c_void_p()
out["create"] = lib.cuMemPoolCreate(ctypes.byref(pool), ctypes.byref(Props(allocType=1, location=Loc(1, 0))))
base0 = info()
mib = 1 << 20
p = U64()
lib.cuMemAllocFromPoolAsync(ctypes.byref(p), 100 * mib, pool, None)
out["after_alloc"] = [info() - base0, pool_attr(pool, RES), pool_attr(pool, USED)]
lib.cuMemFreeAsync(p, None)
out["threshold_0"] = [info() - base0, pool_attr(pool, RES)]
keep = U64(1 << 62)
lib.cuMemPoolSetAttribute(pool, THRESHOLD, ctypes.byref(keep))
lib.cuMemAllocFromPoolAsync(ctypes.byref(p), 100 * mib, pool, None)
lib.cuMemFreeAsync(p, None)
out["kept"] = [info() - base0, pool_attr(pool, RES), pool_attr(pool, USED)]
lib.cuMemAllocFromPoolAsync(ctypes.byref(p), 60 * mib, pool, None)
out["reused"] = info() - base0
lib.cuMemFreeAsync(p, None)
out["trim"] = lib.cuMemPoolTrimTo(pool, 10 * mib)
out["trimmed"] = [info() - base0, pool_attr(pool, RES)]
out["destroy"] = lib.cuMemPoolDestroy(pool)
out["destroyed"] = info() - base0
dflt = ctypes.c_void_p(); cur = ctypes.c_void_p()
out["default"] = [lib.cuDeviceGetDefaultMemPool(ctypes.byref(dflt), 0), lib.cuDeviceGetMemPool(ctypes.byref(cur), 0),
                  dflt.value == cur.value, lib.cuMemPoolDestroy(dflt)]
h = ctypes.c_void_p()
out["host"] = [lib.cuMemAllocHost_v2(ctypes.byref(h), 1 << 30), info() - base0, lib.cuMemFreeHost(h)]
""",
    )
    mib = 1 << 20
    assert out["create"] == 0
    assert out["after_alloc"] == [100 * mib, 100 * mib, 100 * mib]
    assert out["threshold_0"] == [0, 0], "with release threshold 0 the pool gives memory back"
    assert out["kept"] == [100 * mib, 100 * mib, 0], "above the threshold the pool keeps what it holds"
    assert out["reused"] == 100 * mib, "reuse takes nothing more from the card"
    assert out["trim"] == 0 and out["trimmed"] == [10 * mib, 10 * mib]
    assert out["destroy"] == 0 and out["destroyed"] == 0
    assert out["default"] == [0, 0, True, INVALID_VALUE]
    assert out["host"] == [0, 0, 0], "host memory is not device memory"


def test_context_stack_and_streams(bare_env):
    out = ctypes_run(
        bare_env,
        """
lib.cuInit(0)
c0, c1, cur, popped = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
d = ctypes.c_int()
out["create"] = lib.cuCtxCreate_v2(ctypes.byref(c1), 0, 1)  # pushed
lib.cuCtxGetCurrent(ctypes.byref(cur)); out["current_is_created"] = cur.value == c1.value
lib.cuCtxGetDevice(ctypes.byref(d)); out["device"] = d.value
lib.cuDevicePrimaryCtxRetain(ctypes.byref(c0), 0)
out["push"] = lib.cuCtxPushCurrent_v2(c0)
lib.cuCtxGetDevice(ctypes.byref(d)); out["device_after_push"] = d.value
out["pop"] = [lib.cuCtxPopCurrent_v2(ctypes.byref(popped)), popped.value == c0.value]
lib.cuCtxGetCurrent(ctypes.byref(cur)); out["back_to_created"] = cur.value == c1.value
out["set"] = lib.cuCtxSetCurrent(c0)
lib.cuCtxGetDevice(ctypes.byref(d)); out["device_after_set"] = d.value
out["destroy"] = lib.cuCtxDestroy_v2(c1)
out["destroy_again"] = lib.cuCtxDestroy_v2(c1)
out["push_destroyed"] = lib.cuCtxPushCurrent_v2(c1)
s, e1, e2 = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
ms = ctypes.c_float()
out["stream"] = [lib.cuStreamCreate(ctypes.byref(s), 1), lib.cuStreamQuery(s), lib.cuStreamSynchronize(s)]
out["events"] = [lib.cuEventCreate(ctypes.byref(e1), 0), lib.cuEventCreate(ctypes.byref(e2), 0),
                 lib.cuEventRecord(e1, s), lib.cuEventRecord(e2, s), lib.cuStreamWaitEvent(s, e2, 0),
                 lib.cuEventSynchronize(e2), lib.cuEventElapsedTime(ctypes.byref(ms), e1, e2)]
out["destroyed_stream"] = [lib.cuStreamDestroy_v2(s), lib.cuStreamQuery(s), lib.cuStreamDestroy_v2(s)]
out["events_gone"] = [lib.cuEventDestroy_v2(e1), lib.cuEventQuery(e1)]
lib.cuCtxSetCurrent(None)
out["no_context_stream"] = lib.cuStreamCreate(ctypes.byref(s), 0)
""",
    )
    assert out["create"] == 0 and out["current_is_created"] and out["device"] == 1
    assert out["push"] == 0 and out["device_after_push"] == 0 and out["pop"] == [0, True] and out["back_to_created"]
    assert out["set"] == 0 and out["device_after_set"] == 0
    assert out["destroy"] == 0 and out["destroy_again"] == INVALID_CONTEXT and out["push_destroyed"] == INVALID_CONTEXT
    assert out["stream"] == [0, 0, 0] and out["events"] == [0] * 7
    assert out["destroyed_stream"] == [0, INVALID_HANDLE, INVALID_HANDLE] and out["events_gone"] == [0, INVALID_HANDLE]
    assert out["no_context_stream"] == INVALID_CONTEXT


@pytest.mark.parametrize("legacy", ["cuMemAlloc", "cuMemAllocPitch"])
def test_legacy_32_bit_entry_points_hand_out_32_bit_pointers(bare_env, legacy):
    out = ctypes_run(
        bare_env,
        PRELUDE
        + f"""
p = ctypes.c_uint32(); pitch = ctypes.c_uint32()
if "{legacy}" == "cuMemAlloc":
    out["rc"] = lib.cuMemAlloc(ctypes.byref(p), 1 << 20)
else:
    out["rc"] = lib.cuMemAllocPitch(ctypes.byref(p), ctypes.byref(pitch), 1000, 4, 4)
out["counted"] = info()
out["free"] = lib.cuMemFree(p)
out["after"] = info()
""",
    )
    assert out["rc"] == 0 and out["free"] == 0
    assert out["counted"] - out["after"] in (1 << 20, 1024 * 4)


def test_pitched_copies_place_rows_at_the_pitch(bare_env):
    out = ctypes_run(
        bare_env,
        PRELUDE
        + """
S = ctypes.c_size_t
class Copy2D(ctypes.Structure):
    _fields_ = [("srcXInBytes", S), ("srcY", S), ("srcMemoryType", ctypes.c_int), ("srcHost", ctypes.c_void_p),
                ("srcDevice", U64), ("srcArray", ctypes.c_void_p), ("srcPitch", S),
                ("dstXInBytes", S), ("dstY", S), ("dstMemoryType", ctypes.c_int), ("dstHost", ctypes.c_void_p),
                ("dstDevice", U64), ("dstArray", ctypes.c_void_p), ("dstPitch", S), ("WidthInBytes", S), ("Height", S)]
HOST, DEVICE, ARRAY = 1, 2, 3
rows = [bytes([65 + r]) * 100 for r in range(4)]
src = ctypes.create_string_buffer(b"".join(rows), 400)
d, pitch = U64(), S()
assert lib.cuMemAllocPitch_v2(ctypes.byref(d), ctypes.byref(pitch), S(100), S(4), 4) == 0
out["pitch"] = pitch.value
up = Copy2D(srcMemoryType=HOST, srcHost=ctypes.cast(src, ctypes.c_void_p), srcPitch=100,
            dstMemoryType=DEVICE, dstDevice=d.value, dstPitch=pitch.value, WidthInBytes=100, Height=4)
out["up"] = lib.cuMemcpy2D_v2(ctypes.byref(up))
row2 = ctypes.create_string_buffer(100)
lib.cuMemcpyDtoH_v2(row2, U64(d.value + 2 * pitch.value), 100)
out["row2"] = row2.raw == rows[2]
back = ctypes.create_string_buffer(400)
down = Copy2D(srcMemoryType=DEVICE, srcDevice=d.value, srcPitch=pitch.value,
              dstMemoryType=HOST, dstHost=ctypes.cast(back, ctypes.c_void_p), dstPitch=100, WidthInBytes=100, Height=4)
out["down"] = lib.cuMemcpy2D_v2(ctypes.byref(down))
out["round_trip"] = back.raw == src.raw
tall = Copy2D(srcMemoryType=HOST, srcHost=ctypes.cast(src, ctypes.c_void_p), srcPitch=100,
              dstMemoryType=DEVICE, dstDevice=d.value, dstPitch=pitch.value, WidthInBytes=100, Height=5)
out["past_end"] = lib.cuMemcpy2D_v2(ctypes.byref(tall))
arr = Copy2D(srcMemoryType=ARRAY, dstMemoryType=DEVICE, dstDevice=d.value, dstPitch=pitch.value, WidthInBytes=1, Height=1)
out["array"] = lib.cuMemcpy2D_v2(ctypes.byref(arr))
""",
    )
    assert out["pitch"] == 512
    assert out["up"] == 0 and out["row2"] and out["down"] == 0 and out["round_trip"]
    assert out["past_end"] == INVALID_VALUE and out["array"] == NOT_SUPPORTED


def test_arrays_are_charged_to_the_card(bare_env):
    out = ctypes_run(
        bare_env,
        PRELUDE
        + """
S = ctypes.c_size_t
class Desc3D(ctypes.Structure):
    _fields_ = [("Width", S), ("Height", S), ("Depth", S), ("Format", ctypes.c_int), ("NumChannels", ctypes.c_uint),
                ("Flags", ctypes.c_uint)]
base0 = info()
a = ctypes.c_void_p()
out["create"] = lib.cuArray3DCreate_v2(ctypes.byref(a), ctypes.byref(Desc3D(256, 256, 4, 0x10, 2, 0)))  # half2
out["charged"] = info() - base0
d = Desc3D()
out["descriptor"] = [lib.cuArray3DGetDescriptor_v2(ctypes.byref(d), a), d.Width, d.Height, d.Depth, d.NumChannels]
out["destroy"] = [lib.cuArrayDestroy(a), info() - base0]
out["bc_format"] = lib.cuArray3DCreate_v2(ctypes.byref(a), ctypes.byref(Desc3D(256, 256, 0, 0x91, 1, 0)))
out["bad_channels"] = lib.cuArray3DCreate_v2(ctypes.byref(a), ctypes.byref(Desc3D(256, 256, 0, 0x20, 3, 0)))
""",
    )
    assert out["create"] == 0 and out["charged"] == 256 * 256 * 4 * 2 * 2
    assert out["descriptor"] == [0, 256, 256, 4, 2] and out["destroy"] == [0, 0]
    assert out["bc_format"] == NOT_SUPPORTED and out["bad_channels"] == INVALID_VALUE
