"""The mock container toolkit (native/toolkit/gpushare-mock-runtime): spec rewriting and
pass-through to runc.

The rewriting is checked on the functions, and the program as containerd's shim runs
it: from an installed driver directory, with a stand-in runc that records the arguments
it got and the config.json it saw.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpushare_conformance import native

SCRIPT = native.source_dir() / "toolkit" / "gpushare-mock-runtime"
INVENTORY = "/etc/gpushare/inventory.yaml"
RO = ["rbind", "ro", "nosuid", "nodev"]


def _load():
    loader = importlib.machinery.SourceFileLoader("gpushare_mock_runtime", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


rt = _load()
CONFIG = rt.Config("/usr/local/lib/gpushare-mock-driver", "/usr/sbin/runc", INVENTORY)
DRV = CONFIG.driver_dir


def _spec(*env: str) -> dict:
    return {
        "ociVersion": "1.0.2-dev",
        "process": {"args": ["sleep", "3600"], "env": ["PATH=/usr/bin:/bin", *env], "cwd": "/"},
        "root": {"path": "rootfs"},
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
    }


def _bind(source: str, destination: str) -> dict:
    return {"destination": destination, "type": "bind", "source": source, "options": RO}


def _rootfs(tmp_path: Path, *dirs: str) -> str:
    root = tmp_path / "rootfs"
    for d in dirs:
        (root / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
    root.mkdir(exist_ok=True)
    return str(root)


def _env(spec: dict) -> dict[str, str]:
    return dict(e.split("=", 1) for e in spec["process"]["env"])


# ------------------------------------------------------------------ rewriting
def test_gpu_spec_gets_the_driver_where_a_debian_image_looks(tmp_path):
    rootfs = _rootfs(tmp_path, "usr/lib/x86_64-linux-gnu", "usr/lib64")
    spec = rt.rewrite_spec(_spec("NVIDIA_VISIBLE_DEVICES=1"), CONFIG, rootfs, machine="x86_64")
    assert spec["mounts"] == [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        _bind(f"{DRV}/lib/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
        _bind(f"{DRV}/lib/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"),
        _bind(f"{DRV}/lib/libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"),
        _bind(f"{DRV}/lib/libnvidia-ml.so.1", "/usr/local/nvidia/lib64/libnvidia-ml.so.1"),
        _bind(f"{DRV}/bin/nvidia-smi", "/usr/bin/nvidia-smi"),
        _bind(INVENTORY, INVENTORY),
    ]
    assert _env(spec) == {
        "PATH": "/usr/bin:/bin",
        "NVIDIA_VISIBLE_DEVICES": "1",
        "GPUSHARE_MOCK_INVENTORY": INVENTORY,
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64",
    }


def test_rhel_style_image_gets_usr_lib64(tmp_path):
    rootfs = _rootfs(tmp_path, "usr/lib64")
    spec = rt.rewrite_spec(_spec("NVIDIA_VISIBLE_DEVICES=all"), CONFIG, rootfs, machine="x86_64")
    dests = [m["destination"] for m in spec["mounts"]]
    assert "/usr/lib64/libnvidia-ml.so.1" in dests and "/usr/lib64/libcuda.so.1" in dests
    assert not any("x86_64-linux-gnu" in d for d in dests)


def test_library_dir_symlinks_resolve_inside_the_image(tmp_path):
    image = tmp_path / "image"
    (image / "opt" / "multiarch").mkdir(parents=True)
    (image / "usr" / "lib").mkdir(parents=True)
    # An absolute link means the image's /opt, never the host's.
    (image / "usr" / "lib" / "x86_64-linux-gnu").symlink_to("/opt/multiarch")
    assert rt.image_lib_dir(str(image), "x86_64") == "/usr/lib/x86_64-linux-gnu"
    other = tmp_path / "other"
    (other / "usr" / "lib").mkdir(parents=True)
    (other / "usr" / "lib" / "x86_64-linux-gnu").symlink_to("/tmp")  # the host has /tmp, the image not
    assert rt.image_lib_dir(str(other), "x86_64") is None


def test_image_without_a_known_library_dir_uses_usr_local_nvidia_only(tmp_path):
    spec = rt.rewrite_spec(
        _spec("NVIDIA_VISIBLE_DEVICES=0", "LD_LIBRARY_PATH=/opt/app/lib"),
        CONFIG,
        _rootfs(tmp_path, "lib"),
        machine="x86_64",
    )
    libs = sorted(m["destination"] for m in spec["mounts"] if ".so" in m["destination"])
    assert libs == ["/usr/local/nvidia/lib64/libcuda.so.1", "/usr/local/nvidia/lib64/libnvidia-ml.so.1"]
    assert _env(spec)["LD_LIBRARY_PATH"] == "/opt/app/lib:/usr/local/nvidia/lib64"


def test_ld_library_path_that_has_the_dir_is_kept_and_inventory_env_is_replaced():
    spec = rt.rewrite_spec(
        _spec(
            "NVIDIA_VISIBLE_DEVICES=GPU-1",
            "GPUSHARE_MOCK_INVENTORY=/elsewhere.yaml",
            "LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64",
        ),
        CONFIG,
        None,
    )
    env = spec["process"]["env"]
    assert [e for e in env if e.startswith("GPUSHARE_MOCK_INVENTORY=")] == [f"GPUSHARE_MOCK_INVENTORY={INVENTORY}"]
    assert _env(spec)["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib:/usr/local/nvidia/lib64"


@pytest.mark.parametrize(
    "caps, files",
    [
        ("utility", {"libnvidia-ml.so.1", "nvidia-smi"}),
        ("compute", {"libcuda.so.1"}),
        ("compute,utility", {"libcuda.so.1", "libnvidia-ml.so.1", "nvidia-smi"}),
        ("all", {"libcuda.so.1", "libnvidia-ml.so.1", "nvidia-smi"}),
        ("", {"libcuda.so.1", "libnvidia-ml.so.1", "nvidia-smi"}),
        ("graphics,video", set()),
    ],
)
def test_driver_capabilities_select_the_files(caps, files):
    spec = rt.rewrite_spec(_spec("NVIDIA_VISIBLE_DEVICES=0", f"NVIDIA_DRIVER_CAPABILITIES={caps}"), CONFIG, None)
    added = {os.path.basename(m["destination"]) for m in spec["mounts"][1:]}
    assert added == files | {"inventory.yaml"}


@pytest.mark.parametrize(
    "env",
    [
        (),
        ("NVIDIA_VISIBLE_DEVICES=void",),
        ("NVIDIA_VISIBLE_DEVICES=none",),
        ("NVIDIA_VISIBLE_DEVICES=",),
        ("NVIDIA_VISIBLE_DEVICES=1", "NVIDIA_VISIBLE_DEVICES=void"),
    ],
)
def test_no_gpu_request_means_no_rewrite(env):
    assert rt.rewrite_spec(_spec(*env), CONFIG, None) is None


def test_rewriting_twice_adds_nothing_more():
    once = rt.rewrite_spec(_spec("NVIDIA_VISIBLE_DEVICES=0"), CONFIG, None)
    twice = rt.rewrite_spec(json.loads(json.dumps(once)), CONFIG, None)
    assert twice == once


# ------------------------------------------------------------------ who gets cards
CLOSED = rt.Config(DRV, "/usr/sbin/runc", INVENTORY, accept_envvar_unprivileged=False, accept_volume_mounts=True)


def _device_mount(name: str) -> dict:
    return {"destination": f"{rt.DEVICE_MOUNTS_ROOT}/{name}", "type": "bind", "source": "/dev/null", "options": RO}


def _privileged(spec: dict) -> dict:
    spec["process"]["capabilities"] = {"bounding": ["CAP_CHOWN", "CAP_SYS_ADMIN"]}
    return spec


def test_the_toolkits_defaults_are_the_real_ones(tmp_path):
    (tmp_path / "runtime.conf").write_text("runc=/usr/sbin/runc\ninventory=/i.yaml\n")
    config = rt.Config.load(str(tmp_path))
    assert (config.accept_envvar_unprivileged, config.accept_volume_mounts) == (True, False)
    (tmp_path / "runtime.conf").write_text(
        f"runc=/r\ninventory=/i\n{rt.ACCEPT_ENVVAR_UNPRIVILEGED}=false\n{rt.ACCEPT_VOLUME_MOUNTS}=TRUE\n"
    )
    config = rt.Config.load(str(tmp_path))
    assert (config.accept_envvar_unprivileged, config.accept_volume_mounts) == (False, True)


def test_by_default_an_unprivileged_pods_own_variable_gets_every_card():
    """The hole a deployment must close: no device asked of any plugin, all cards given."""
    spec = rt.rewrite_spec(_spec("NVIDIA_VISIBLE_DEVICES=all"), CONFIG, None)
    assert spec is not None and _env(spec)["NVIDIA_VISIBLE_DEVICES"] == "all"


def test_closed_node_ignores_an_unprivileged_pods_variable():
    assert rt.rewrite_spec(_spec("NVIDIA_VISIBLE_DEVICES=all"), CLOSED, None) is None


def test_closed_node_honours_a_privileged_containers_variable():
    spec = rt.rewrite_spec(_privileged(_spec("NVIDIA_VISIBLE_DEVICES=all")), CLOSED, None)
    assert spec is not None and _env(spec)["NVIDIA_VISIBLE_DEVICES"] == "all"


def test_closed_node_gives_the_cards_the_device_plugin_mounted_whatever_the_variable_says():
    spec = _spec("NVIDIA_VISIBLE_DEVICES=all")
    spec["mounts"] += [_device_mount("2"), _device_mount("0")]
    out = rt.rewrite_spec(spec, CLOSED, None)
    assert out is not None and _env(out)["NVIDIA_VISIBLE_DEVICES"] == "2,0"
    assert [m["source"] for m in out["mounts"] if m["destination"] == "/usr/bin/nvidia-smi"]


def test_device_mounts_are_read_only_when_the_node_accepts_them():
    spec = _spec()
    spec["mounts"].append(_device_mount("1"))
    assert rt.rewrite_spec(spec, CONFIG, None) is None
    assert rt.mounted_devices(spec) == ["1"]
    assert rt.rewrite_spec(spec, CLOSED, None) is not None


def test_mounts_outside_the_device_root_or_not_of_dev_null_name_no_device():
    spec = _spec()
    spec["mounts"] += [
        {"destination": f"{rt.DEVICE_MOUNTS_ROOT}-x/3", "type": "bind", "source": "/dev/null"},
        {"destination": f"{rt.DEVICE_MOUNTS_ROOT}/a/b", "type": "bind", "source": "/dev/null"},
        # what a pod can declare itself: an emptyDir mounted where the cards are listed
        {"destination": f"{rt.DEVICE_MOUNTS_ROOT}/all", "type": "bind", "source": "/var/lib/kubelet/pods/x/empty"},
    ]
    assert rt.mounted_devices(spec) == []
    assert rt.rewrite_spec(spec, CLOSED, None) is None


@pytest.mark.parametrize(
    "argv, command, options, rest",
    [
        (
            ["--root", "/r", "--log", "/l.json", "--log-format", "json", "create", "--bundle", "/b", "id"],
            "create",
            {"root": "/r", "log": "/l.json", "log-format": "json"},
            ["--bundle", "/b", "id"],
        ),
        (["--root=/r", "--systemd-cgroup", "start", "id"], "start", {"root": "/r"}, ["id"]),
        (["--version"], None, {}, []),
    ],
)
def test_parse_command(argv, command, options, rest):
    assert rt.parse_command(argv) == (command, options, rest)


@pytest.mark.parametrize(
    "args, bundle",
    [
        (["--bundle", "/b", "id"], "/b"),
        (["--bundle=/b", "id"], "/b"),
        (["-b", "/b", "--pid-file", "/p", "id"], "/b"),
        (["--pid-file", "/p", "id"], "."),
    ],
)
def test_bundle_of(args, bundle):
    assert rt.bundle_of(args) == bundle


def test_bad_runtime_conf_is_named(tmp_path):
    (tmp_path / "runtime.conf").write_text("runc=/usr/sbin/runc\nrunk=/x\n")
    with pytest.raises(
        rt.ToolkitError, match=r"runtime.conf:2: expected runc=PATH, inventory=PATH or one of .*, got 'runk=/x'"
    ):
        rt.Config.load(str(tmp_path))
    (tmp_path / "runtime.conf").write_text(f"runc=/r\ninventory=/i\n{rt.ACCEPT_VOLUME_MOUNTS}=yes\n")
    with pytest.raises(rt.ToolkitError, match=rf"{rt.ACCEPT_VOLUME_MOUNTS}= must be true or false, got 'yes'"):
        rt.Config.load(str(tmp_path))
    (tmp_path / "runtime.conf").write_text("runc=runc\ninventory=/i.yaml\n")
    with pytest.raises(rt.ToolkitError, match=r"runc= must be an absolute path, got 'runc'"):
        rt.Config.load(str(tmp_path))


# ------------------------------------------------------------------ the program
@pytest.fixture
def installed(tmp_path: Path, seed_inventory: Path, native_root: Path) -> dict[str, Path]:
    """A driver directory as the local provider installs it, with a recording runc."""
    drv = tmp_path / "driver"
    (drv / "bin").mkdir(parents=True)
    (drv / "lib").mkdir()
    shutil.copy2(SCRIPT, drv / "bin" / "gpushare-mock-runtime")
    for rel in ("lib/libnvidia-ml.so.1", "lib/libcuda.so.1", "bin/nvidia-smi"):
        shutil.copy2(native_root / rel, drv / rel)
    record = tmp_path / "runc-called"
    runc = tmp_path / "runc"
    runc.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}\ngrep SigIgn /proc/$$/status > {record}.sigign\n')
    runc.chmod(0o755)
    (drv / "runtime.conf").write_text(f"runc={runc}\ninventory={seed_inventory}\n")
    bundle = tmp_path / "bundle"
    (bundle / "rootfs" / "usr" / "lib" / "x86_64-linux-gnu").mkdir(parents=True)
    return {
        "wrapper": drv / "bin" / "gpushare-mock-runtime",
        "record": record,
        "bundle": bundle,
        "inventory": seed_inventory,
        "drv": drv,
    }


def _write_spec(bundle: Path, spec: dict) -> bytes:
    # Indented and key-ordered as containerd writes it: the bytes must survive untouched.
    raw = json.dumps(spec, indent=2).encode()
    (bundle / "config.json").write_bytes(raw)
    return raw


def _run(installed, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(installed["wrapper"]), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )


def _called(installed) -> list[str]:
    return installed["record"].read_text().splitlines()


def test_create_of_a_gpu_container_rewrites_the_spec_then_runs_runc(installed):
    bundle = installed["bundle"]
    _write_spec(bundle, _spec("NVIDIA_VISIBLE_DEVICES=1"))
    args = [
        "--root",
        "/run/x",
        "--log",
        str(bundle / "log.json"),
        "--log-format",
        "json",
        "create",
        "--bundle",
        str(bundle),
        "--pid-file",
        str(bundle / "init.pid"),
        "cid",
    ]
    result = _run(installed, *args)
    assert result.returncode == 0, result.stderr
    assert _called(installed) == args
    spec = json.loads((bundle / "config.json").read_text())
    by_dest = {m["destination"]: m["source"] for m in spec["mounts"]}
    drv = installed["drv"]
    assert by_dest["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"] == f"{drv}/lib/libnvidia-ml.so.1"
    assert by_dest["/usr/local/nvidia/lib64/libcuda.so.1"] == f"{drv}/lib/libcuda.so.1"
    assert by_dest["/usr/bin/nvidia-smi"] == f"{drv}/bin/nvidia-smi"
    assert by_dest[str(installed["inventory"])] == str(installed["inventory"])
    assert _env(spec)["GPUSHARE_MOCK_INVENTORY"] == str(installed["inventory"])


def test_run_with_the_bundle_as_cwd_is_rewritten_too(installed):
    bundle = installed["bundle"]
    _write_spec(bundle, _spec("NVIDIA_VISIBLE_DEVICES=all"))
    assert _run(installed, "run", "--detach", "cid", cwd=bundle).returncode == 0
    assert "/usr/bin/nvidia-smi" in (bundle / "config.json").read_text()


@pytest.mark.parametrize("env", [(), ("NVIDIA_VISIBLE_DEVICES=void",)])
def test_plain_and_void_specs_are_byte_for_byte_unchanged(installed, env):
    bundle = installed["bundle"]
    raw = _write_spec(bundle, _spec(*env))
    before = os.stat(bundle / "config.json")
    args = ["--root", "/run/x", "create", "--bundle", str(bundle), "cid"]
    assert _run(installed, *args).returncode == 0
    assert (bundle / "config.json").read_bytes() == raw
    assert os.stat(bundle / "config.json").st_ino == before.st_ino
    assert _called(installed) == args


@pytest.mark.parametrize(
    "args",
    [
        ["start", "cid"],
        ["--root", "/r", "delete", "--force", "cid"],
        ["exec", "cid", "sh", "-c", "nvidia-smi", "-p", "/p.json"],
        ["state", "cid"],
        ["--version"],
    ],
)
def test_other_commands_pass_through_untouched(installed, args):
    bundle = installed["bundle"]
    raw = _write_spec(bundle, _spec("NVIDIA_VISIBLE_DEVICES=1"))
    assert _run(installed, *args, cwd=bundle).returncode == 0
    assert _called(installed) == args
    assert (bundle / "config.json").read_bytes() == raw


def _process(*env: str) -> dict:
    return {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": ["nvidia-smi"], "env": list(env), "cwd": "/"}


def test_exec_of_a_gpu_process_gets_the_driver_environment(installed, tmp_path):
    process_file = tmp_path / "runc-process123"
    process_file.write_text(json.dumps(_process("PATH=/usr/bin", "NVIDIA_VISIBLE_DEVICES=1", "LD_LIBRARY_PATH=/opt")))
    args = ["--root", "/r", "exec", "--detach", "--pid-file", "/p", "--process", str(process_file), "cid"]
    assert _run(installed, *args).returncode == 0
    assert _called(installed) == args
    process = json.loads(process_file.read_text())
    assert process["env"] == [
        "PATH=/usr/bin",
        "NVIDIA_VISIBLE_DEVICES=1",
        "LD_LIBRARY_PATH=/opt:/usr/local/nvidia/lib64",
        f"GPUSHARE_MOCK_INVENTORY={installed['inventory']}",
    ]
    assert process["args"] == ["nvidia-smi"]


@pytest.mark.parametrize("env", [(), ("NVIDIA_VISIBLE_DEVICES=void",)])
def test_exec_of_a_plain_process_is_byte_for_byte_unchanged(installed, tmp_path, env):
    process_file = tmp_path / "runc-process456"
    raw = json.dumps(_process("PATH=/usr/bin", *env), indent=2).encode()
    process_file.write_bytes(raw)
    assert _run(installed, "exec", "-p", str(process_file), "cid").returncode == 0
    assert process_file.read_bytes() == raw


def test_command_option_stops_at_the_container_id():
    assert rt.command_option(["--process=/a", "cid", "-p", "/b"], ("process", "p")) == "/a"
    assert rt.command_option(["cid", "sh", "--process", "/b"], ("process", "p")) is None
    assert rt.command_option(["--cwd", "/w", "-p", "/a", "cid"], ("process", "p")) == "/a"


def test_a_card_the_inventory_lacks_fails_the_create_with_the_mocks_words(installed):
    bundle = installed["bundle"]
    raw = _write_spec(bundle, _spec("NVIDIA_VISIBLE_DEVICES=7"))
    log = bundle / "log.json"
    result = _run(installed, "--log", str(log), "create", "--bundle", str(bundle), "cid")
    assert result.returncode == 1
    assert "gpushare-mock-runtime: NVIDIA_VISIBLE_DEVICES='7' is refused by the mock driver" in result.stderr
    assert "no card '7' in the inventory (3 cards)" in result.stderr
    entry = json.loads(log.read_text().splitlines()[-1])
    assert entry["level"] == "error" and "no card '7'" in entry["msg"]
    assert not installed["record"].exists(), "runc ran for a refused container"
    assert (bundle / "config.json").read_bytes() == raw


def test_missing_inventory_and_config_are_named(installed):
    bundle = installed["bundle"]
    _write_spec(bundle, _spec("NVIDIA_VISIBLE_DEVICES=0"))
    installed["inventory"].unlink()
    result = _run(installed, "create", "--bundle", str(bundle), "cid")
    assert result.returncode == 1 and f"mock inventory {installed['inventory']} is missing" in result.stderr
    (installed["drv"] / "runtime.conf").unlink()
    result = _run(installed, "state", "cid")
    assert result.returncode == 1
    assert f"gpushare-mock-runtime: cannot read {installed['drv'] / 'runtime.conf'}" in result.stderr


def test_runc_starts_with_sigpipe_and_sigxfsz_not_ignored(installed):
    """Ignored signals survive exec into the container's processes: the wrapper must not
    pass on its interpreter's SIG_IGN for SIGPIPE and SIGXFSZ."""
    assert _run(installed, "state", "cid").returncode == 0
    mask = int(Path(f"{installed['record']}.sigign").read_text().split()[1], 16)
    for signum in (13, 25):  # SIGPIPE, SIGXFSZ
        assert not mask & (1 << (signum - 1)), f"signal {signum} ignored in runc: SigIgn {mask:#x}"
