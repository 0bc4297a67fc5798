"""The shim's limits hold across processes, survive SIGKILL and cannot be bypassed."""

from __future__ import annotations

import signal
import subprocess

import pytest

from conftest import CONTEXT_MIB, PYTHON, run, tool

SHARE_MIB = 4096  # seed_env: 4 GiB on each card


def hold(env, root, device: int, mib: int, seconds: int = 60) -> subprocess.Popen[str]:
    """Start a probe that allocates and holds; return once the allocation is made."""
    p = subprocess.Popen(
        [
            tool(root, "gpushare-probe"),
            "--device",
            str(device),
            "--alloc-mib",
            str(mib),
            "--hold-seconds",
            str(seconds),
        ],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = p.stdout.readline()
    assert "allocated" in line, line
    return p


def alloc(env, root, device: int, mib: int) -> subprocess.CompletedProcess[str]:
    return run([tool(root, "gpushare-probe"), "--device", str(device), "--alloc-mib", str(mib)], env)


def test_two_processes_cannot_together_exceed_the_share(seed_env, native_root):
    first = hold(seed_env, native_root, 0, 3000)
    try:
        second = alloc(seed_env, native_root, 0, 1500)
        assert second.returncode == 2 and "CUDA_ERROR_OUT_OF_MEMORY" in second.stdout
        # 3000 + the rest <= 4096, each of the two processes paying its context
        rest = SHARE_MIB - 3000 - 2 * CONTEXT_MIB
        fits = alloc(seed_env, native_root, 0, rest)
        assert fits.returncode == 0, fits.stdout
        past = alloc(seed_env, native_root, 0, rest + 1)
        assert past.returncode == 2 and "CUDA_ERROR_OUT_OF_MEMORY" in past.stdout, past.stdout
        other_card = alloc(seed_env, native_root, 1, SHARE_MIB - CONTEXT_MIB)  # the share is per card
        assert other_card.returncode == 0, other_card.stdout
    finally:
        first.kill()
        first.wait()


def test_freed_memory_returns_to_the_share(seed_env, native_root):
    for _ in range(3):  # all this process may have beside its context, again and again
        proc = alloc(seed_env, native_root, 0, SHARE_MIB - CONTEXT_MIB)
        assert proc.returncode == 0, proc.stdout
    many = run([tool(native_root, "gpushare-probe"), "--device", "0", "--alloc-mib", "1000", "--count", "5"], seed_env)
    assert many.returncode == 2 and "CUDA_ERROR_OUT_OF_MEMORY" in many.stdout


def test_sigkilled_process_usage_is_reclaimed(seed_env, native_root):
    victim = hold(seed_env, native_root, 1, 3500)
    assert alloc(seed_env, native_root, 1, 1000).returncode == 2
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    after = alloc(seed_env, native_root, 1, 3500)
    assert after.returncode == 0, after.stdout + after.stderr
    used = run([tool(native_root, "nvidia-smi"), "--query-gpu=memory.used", "--format=csv,noheader,nounits"], seed_env)
    assert used.stdout.splitlines() == ["0", "0"]


def test_separate_containers_do_not_share_accounting(seed_env, native_root, tmp_path):
    other = dict(seed_env, GPUSHARE_USAGE_FILE=str(tmp_path / "other-container"))
    first = hold(seed_env, native_root, 0, 3000)
    try:
        assert alloc(other, native_root, 0, 3000).returncode == 0
    finally:
        first.kill()
        first.wait()


@pytest.mark.parametrize("how", ["direct", "dlsym-handle", "rtld-default", "rtld-next", "proc", "proc-v2"])
def test_every_lookup_path_hits_the_limit(seed_env, native_root, how):
    env = dict(seed_env, LD_LIBRARY_PATH=f"{native_root / 'tests'}:{seed_env['LD_LIBRARY_PATH']}")
    test = tool(native_root, "bypass-test")
    ok = run([test, "alloc", how, "3000"], env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == f"total={4096 << 20} result=CUDA_SUCCESS"
    over = run([test, "alloc", how, "5000"], env)
    assert over.stdout.strip() == f"total={4096 << 20} result=CUDA_ERROR_OUT_OF_MEMORY"


def test_bypass_paths_reach_the_physical_card_without_the_shim(bare_env, native_root):
    """Negative control: the same lookups see the whole card when the shim is absent."""
    env = dict(bare_env, LD_LIBRARY_PATH=f"{native_root / 'tests'}:{bare_env['LD_LIBRARY_PATH']}")
    for how in ("dlsym-handle", "rtld-next", "proc"):
        out = run([tool(native_root, "bypass-test"), "alloc", how, "5000"], env).stdout.strip()
        assert out == f"total={16160 << 20} result=CUDA_SUCCESS", how


@pytest.mark.parametrize("preload", [True, False])
def test_rtld_next_stays_relative_to_the_caller(seed_env, native_root, preload):
    env = dict(seed_env, LD_LIBRARY_PATH=f"{native_root / 'tests'}:{seed_env['LD_LIBRARY_PATH']}")
    if not preload:
        env.pop("LD_PRELOAD")
    proc = run([tool(native_root, "bypass-test"), "order"], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "helper-next=2 main-next=1 linked=1"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GPUSHARE_MEMORY_LIMIT_1", "4x"),
        ("GPUSHARE_MEMORY_LIMIT_0", "4096"),
        ("GPUSHARE_MEMORY_LIMIT", "-1GiB"),
        ("GPUSHARE_MEMORY_LIMIT_1", "0MiB"),
        ("GPUSHARE_MEMORY_LIMIT_1", "4 GiB"),
        ("GPUSHARE_MEMORY_LIMIT_X", "4GiB"),
        ("GPUSHARE_MEMORY_LIMIT_0", "99999999999999999999GiB"),
    ],
)
def test_malformed_limits_are_refused(seed_env, native_root, name, value):
    env = dict(seed_env, **{name: value})
    probe = run([tool(native_root, "gpushare-probe")], env)
    assert probe.returncode != 0
    assert f"gpushare-shim: invalid {name}='{value}': " in probe.stderr
    assert "totalMemory" not in probe.stderr
    smi = run([tool(native_root, "nvidia-smi")], env)
    assert smi.returncode != 0 and "Failed to initialize NVML" in smi.stdout
    assert f"gpushare-shim: invalid {name}='{value}': " in smi.stderr
    nvml = run([PYTHON, "-c", "import pynvml; pynvml.nvmlInit()"], env)
    assert nvml.returncode != 0 and "NVMLError" in nvml.stderr


def test_units_message_names_the_accepted_units(seed_env, native_root):
    env = dict(seed_env, GPUSHARE_MEMORY_LIMIT_1="4x")
    err = run([tool(native_root, "gpushare-probe")], env).stderr
    assert "gpushare-shim: invalid GPUSHARE_MEMORY_LIMIT_1='4x': expected an integer with unit B, KiB, MiB, GiB" in err


@pytest.mark.parametrize(("value", "mib"), [("2048MiB", 2048), ("2g", 2048), ("2097152k", 2048), ("2147483648B", 2048)])
def test_limit_units(seed_env, native_root, value, mib):
    env = {k: v for k, v in seed_env.items() if not k.startswith("GPUSHARE_MEMORY_LIMIT")}
    env["GPUSHARE_MEMORY_LIMIT"] = value
    env["GPUSHARE_MEMORY_LIMIT_1"] = "1GiB"  # per-card wins over the global one
    out = run([tool(native_root, "nvidia-smi"), "--query-gpu=memory.total", "--format=csv,noheader,nounits"], env)
    assert out.stdout.splitlines() == [str(mib), "1024"]


def test_no_limit_variable_is_a_transparent_pass_through(bare_env, native_root, tmp_path):
    env = dict(
        bare_env,
        LD_PRELOAD=str(native_root / "lib" / "libgpushare-shim.so"),
        GPUSHARE_USAGE_FILE=str(tmp_path / "never-created"),
    )
    probe = run([tool(native_root, "gpushare-probe"), "--raw"], env)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.count(f"total_bytes={16160 << 20} ") == 2
    assert alloc(env, native_root, 0, 15000).returncode == 0
    assert not (tmp_path / "never-created").exists()
    assert probe.stderr == ""


def test_cuda_visible_devices_maps_to_the_right_card(seed_env, native_root):
    """CUDA device 0 under CUDA_VISIBLE_DEVICES=1 is container card 1: its limit and usage apply."""
    env = dict(seed_env, GPUSHARE_MEMORY_LIMIT_1="2GiB")
    only_second = dict(env, CUDA_VISIBLE_DEVICES="1")
    raw = run([tool(native_root, "gpushare-probe"), "--raw"], only_second).stdout.splitlines()
    assert len(raw) == 1 and f"total_bytes={2048 << 20} " in raw[0] and "pci_bus_id=0000:00:0a.0" in raw[0]
    holder = hold(only_second, native_root, 0, 1500)
    try:
        assert alloc(env, native_root, 1, 1000).returncode == 2  # same card, seen as device 1
        assert alloc(env, native_root, 0, 3000).returncode == 0  # card 0 untouched
    finally:
        holder.kill()
        holder.wait()


def test_cuda_visible_devices_by_uuid(seed_env, native_root):
    uuids = run([tool(native_root, "nvidia-smi"), "--query-gpu=uuid", "--format=csv,noheader"], seed_env).stdout.split()
    env = dict(seed_env, GPUSHARE_MEMORY_LIMIT_1="2GiB", CUDA_VISIBLE_DEVICES=uuids[1])
    raw = run([tool(native_root, "gpushare-probe"), "--raw"], env).stdout.splitlines()
    assert len(raw) == 1 and f"total_bytes={2048 << 20} " in raw[0]
    assert alloc(env, native_root, 0, 2500).returncode == 2


def test_shell_children_inherit_the_limit(seed_env, native_root):
    probe = tool(native_root, "gpushare-probe")
    proc = run(["sh", "-c", f"sh -c '{probe} --device 0 --alloc-mib 5000'"], seed_env)
    assert proc.returncode == 2 and "CUDA_ERROR_OUT_OF_MEMORY" in proc.stdout
