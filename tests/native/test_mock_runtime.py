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
from gpushare_stack.deviceplugin.discovery import GpuCard
from gpushare_stack.dra.edits import container_edits, write_edits
from gpushare_stack.dra.shares import Share

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
        rt.ToolkitError,
        match=r"runtime.conf:2: expected runc=PATH, inventory=PATH, dra-edits=PATH or one of .*, got 'runk=/x'",
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
    for sub in ("bin", "lib", "libexec"):
        (drv / sub).mkdir(parents=True)
    # As on a node: the launcher is what containerd runs, the program edits the specs.
    shutil.copy2(native_root / "toolkit" / "gpushare-mock-runtime", drv / "bin" / "gpushare-mock-runtime")
    shutil.copy2(SCRIPT, drv / "libexec" / "gpushare-mock-runtime")
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


def _break_the_program(installed) -> None:
    program = installed["drv"] / "libexec" / "gpushare-mock-runtime"
    program.write_text("#!/bin/sh\necho the toolkit program ran >&2\nexit 3\n")


@pytest.mark.parametrize("args", [["start", "cid"], ["--root", "/r", "delete", "--force", "cid"], ["state", "cid"]])
def test_commands_with_no_spec_go_straight_to_runc(installed, args):
    """containerd runs the wrapper for every runc command: only create, run and exec
    start the program that edits specs."""
    _break_the_program(installed)
    result = _run(installed, *args)
    assert result.returncode == 0, result.stderr
    assert _called(installed) == args


@pytest.mark.parametrize(
    "args",
    [["create", "--bundle", "/b", "cid"], ["--log", "state", "run", "cid"], ["exec", "cid", "true"], ["--version"]],
)
def test_commands_that_may_edit_a_spec_go_to_the_toolkit_program(installed, args):
    _break_the_program(installed)
    result = _run(installed, *args)
    assert result.returncode == 3 and "the toolkit program ran" in result.stderr, (args, result.stderr)
    assert not installed["record"].exists()


@pytest.mark.parametrize(
    "conf, says",
    [
        ("runc={runc}\ninventory={inventory}\ncolour=blue\n", "expected runc=PATH, inventory=PATH"),
        ("runc=runc\ninventory={inventory}\n", "runc= must be an absolute path, got 'runc'"),
        ("runc={runc}\n", "inventory= must be an absolute path, got None"),
        (
            "runc={runc}\ninventory={inventory}\naccept-nvidia-visible-devices-as-volume-mounts=yes\n",
            "must be true or false, got 'yes'",
        ),
        ("runc=/nonexistent/runc\ninventory={inventory}\n", "cannot run /nonexistent/runc"),
    ],
    ids=["unknown-key", "relative-runc", "no-inventory", "bad-switch", "runc-missing"],
)
def test_a_state_under_a_config_the_launcher_doubts_gets_the_programs_error(installed, tmp_path, conf, says):
    runc = (installed["drv"] / "runtime.conf").read_text().split("runc=")[1].split()[0]
    (installed["drv"] / "runtime.conf").write_text(conf.format(runc=runc, inventory=installed["inventory"]))
    result = _run(installed, "state", "cid")
    assert result.returncode == 1 and says in result.stderr, result.stderr
    assert not installed["record"].exists()


def test_runc_starts_with_sigpipe_and_sigxfsz_not_ignored(installed):
    """Ignored signals survive exec into the container's processes: the wrapper must not
    pass on its interpreter's SIG_IGN for SIGPIPE and SIGXFSZ."""
    assert _run(installed, "state", "cid").returncode == 0
    mask = int(Path(f"{installed['record']}.sigign").read_text().split()[1], 16)
    for signum in (13, 25):  # SIGPIPE, SIGXFSZ
        assert not mask & (1 << (signum - 1)), f"signal {signum} ignored in runc: SigIgn {mask:#x}"


# ------------------------------------------------------------------ DRA edits
POD_UID = "0f5a4c7e-1b2d-4e3f-9a8b-7c6d5e4f3a2b"
RW = ["rbind", "rw", "nosuid", "nodev"]


def _annotated(spec: dict, uid: str = POD_UID, name: str = "main", kind: str = "container") -> dict:
    spec["annotations"] = {
        "io.kubernetes.cri.container-type": kind,
        "io.kubernetes.cri.sandbox-uid": uid,
        "io.kubernetes.cri.container-name": name,
        "io.kubernetes.cri.sandbox-id": "abc",
    }
    return spec


def _plugin_edits(tmp_path: Path, *cards: int) -> dict:
    """What the DRA plugin's prepare writes for a container holding 4 GiB of each card."""
    containers = tmp_path / "containers"
    containers.mkdir(exist_ok=True)
    node = {i: GpuCard(i, f"GPU-{i}", "Tesla V100-SXM2-16GB", 16160) for i in range(3)}
    shares = [Share(f"gpu-{n}", f"gpu-{i}", i, 4, None) for n, i in enumerate(cards)]
    return container_edits(POD_UID, 0, shares, node, "/opt/gpushare", str(containers))


def test_edits_set_the_env_over_the_pods_and_add_their_mounts():
    edits = {
        "env": {"LD_PRELOAD": "/opt/gpushare/shim.so", "GPUSHARE_MEM_0": "4GiB"},
        "mounts": [
            {"containerPath": "/opt/gpushare", "hostPath": "/usr/local/gpushare", "readOnly": True},
            {"containerPath": "/run/gpushare/usage", "hostPath": "/var/lib/c/usage", "readOnly": False},
            {"containerPath": "/opt/gpushare", "hostPath": "/usr/local/gpushare", "readOnly": True},
        ],
    }
    spec = rt.apply_edits(_spec("LD_PRELOAD=/evil.so", "LD_PRELOAD=/evil2.so", "HOME=/root"), edits)
    assert spec["process"]["env"] == [
        "PATH=/usr/bin:/bin",
        "LD_PRELOAD=/opt/gpushare/shim.so",
        "HOME=/root",
        "GPUSHARE_MEM_0=4GiB",
    ]
    assert spec["mounts"][1:] == [
        _bind("/usr/local/gpushare", "/opt/gpushare"),
        {"destination": "/run/gpushare/usage", "type": "bind", "source": "/var/lib/c/usage", "options": RW},
    ]
    assert rt.apply_edits(json.loads(json.dumps(spec)), edits) == spec


@pytest.mark.parametrize(
    "annotations",
    [
        {},
        {"io.kubernetes.cri.container-type": "sandbox", "io.kubernetes.cri.sandbox-uid": POD_UID},
        {"io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.sandbox-uid": POD_UID},
    ]
    + [
        _annotated({}, uid=uid, name=name)["annotations"]
        for uid, name in [("", "main"), (".", "main"), ("..", "main"), ("a/b", "main"), (POD_UID, "")]
        + [(POD_UID, ".."), (POD_UID, "."), (POD_UID, "../x"), (POD_UID, "a\0b")]
    ],
)
def test_specs_that_name_no_edits_file(annotations):
    assert rt.edits_path(annotations, CONFIG) is None


def test_edits_path_is_under_the_configured_dir():
    config = rt.Config(DRV, "/usr/sbin/runc", INVENTORY, dra_edits="/srv/dra/")
    assert rt.edits_path(_annotated({})["annotations"], config) == f"/srv/dra/{POD_UID}/main.json"
    assert rt.edits_path(_annotated({})["annotations"], CONFIG) == f"/var/run/gpushare-dra/{POD_UID}/main.json"


@pytest.mark.parametrize(
    "edits, words",
    [
        ([], "the file must be an object with env and mounts, got []"),
        ({"mounts": []}, "env must be an object of strings, got None"),
        ({"env": {"A": 1}, "mounts": []}, "env['A'] must be a string, got 1"),
        ({"env": {"": "x"}, "mounts": []}, "an env name must be non-empty without '=', got ''"),
        ({"env": {}, "mounts": {}}, "mounts must be a list, got {}"),
        ({"env": {}, "mounts": ["/x"]}, "mounts[0] must be an object, got '/x'"),
        (
            {"env": {}, "mounts": [{"containerPath": "x", "hostPath": "/y", "readOnly": True}]},
            "mounts[0].containerPath must be an absolute path, got 'x'",
        ),
        (
            {"env": {}, "mounts": [{"containerPath": "/x", "readOnly": True}]},
            "mounts[0].hostPath must be an absolute path, got None",
        ),
        (
            {"env": {}, "mounts": [{"containerPath": "/x", "hostPath": "/y", "readOnly": "yes"}]},
            "mounts[0].readOnly must be true or false, got 'yes'",
        ),
    ],
)
def test_edits_of_another_shape_are_refused_naming_the_field(edits, words):
    with pytest.raises(rt.ToolkitError) as exc:
        rt.check_edits(edits, "/d/u/main.json")
    assert str(exc.value) == f"DRA edits /d/u/main.json: {words}"


@pytest.fixture
def dra(installed, tmp_path: Path) -> dict[str, Path]:
    """The installed toolkit with its DRA edits in tmp_path/dra (runtime.conf dra-edits=),
    cards named by volume mounts and an unprivileged pod's own variable ignored."""
    conf = installed["drv"] / "runtime.conf"
    conf.write_text(
        conf.read_text() + f"dra-edits={tmp_path / 'dra'}\n"
        f"{rt.ACCEPT_ENVVAR_UNPRIVILEGED}=false\n{rt.ACCEPT_VOLUME_MOUNTS}=true\n"
    )
    return {**installed, "dra": tmp_path / "dra"}


def test_create_applies_the_plugins_edits_and_gives_the_cards_they_mount(dra, tmp_path):
    edits = _plugin_edits(tmp_path, 2, 0)
    write_edits(str(dra["dra"]), POD_UID, "main", edits)
    bundle = dra["bundle"]
    # The pod's own variables: every card, its own preload. The edits win on both.
    _write_spec(bundle, _annotated(_spec("NVIDIA_VISIBLE_DEVICES=all", "LD_PRELOAD=/evil.so")))
    args = ["create", "--bundle", str(bundle), "cid"]
    result = _run(dra, *args)
    assert result.returncode == 0, result.stderr
    assert _called(dra) == args
    spec = json.loads((bundle / "config.json").read_text())
    env = _env(spec)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "2,0"
    for key, value in edits["env"].items():
        if key != "NVIDIA_VISIBLE_DEVICES":
            assert env[key] == value
    assert [e for e in spec["process"]["env"] if e.startswith("LD_PRELOAD=")] == [
        f"LD_PRELOAD={edits['env']['LD_PRELOAD']}"
    ]
    assert env["GPUSHARE_MOCK_INVENTORY"] == str(dra["inventory"])
    for m in edits["mounts"]:
        options = RO if m["readOnly"] else RW
        assert {"destination": m["containerPath"], "type": "bind", "source": m["hostPath"], "options": options} in (
            spec["mounts"]
        )
    assert all(m["readOnly"] for m in edits["mounts"]), "a file the stack mounts is writable"
    assert rt.mounted_devices(spec) == ["2", "0"]
    assert any(m["destination"] == "/usr/bin/nvidia-smi" for m in spec["mounts"])


def test_create_with_edits_but_no_card_still_writes_the_edits(dra):
    write_edits(str(dra["dra"]), POD_UID, "main", {"env": {"A": "1"}, "mounts": []})
    bundle = dra["bundle"]
    _write_spec(bundle, _annotated(_spec()))
    assert _run(dra, "create", "--bundle", str(bundle), "cid").returncode == 0
    spec = json.loads((bundle / "config.json").read_text())
    assert _env(spec) == {"PATH": "/usr/bin:/bin", "A": "1"}
    assert spec["mounts"] == _spec()["mounts"]


@pytest.mark.parametrize(
    "spec",
    [
        _annotated(_spec(), name="sidecar"),  # another container of the pod: no file of its own
        _annotated(_spec(), uid="another-pod"),
        _annotated(_spec(), name="", kind="sandbox"),  # the pod's sandbox (pause) container
        _annotated(_spec(), kind="sandbox"),
        _annotated(_spec(), name=".."),
        _spec(),  # not made by containerd's CRI
    ],
)
def test_specs_without_their_own_edits_are_byte_for_byte_unchanged(dra, tmp_path, spec):
    write_edits(str(dra["dra"]), POD_UID, "main", _plugin_edits(tmp_path, 1))
    # a file the ".." container would find if names were not checked
    (dra["dra"] / f"{POD_UID}.json").write_text(json.dumps({"env": {"X": "1"}, "mounts": []}))
    bundle = dra["bundle"]
    raw = _write_spec(bundle, spec)
    before = os.stat(bundle / "config.json")
    result = _run(dra, "create", "--bundle", str(bundle), "cid")
    assert result.returncode == 0, result.stderr
    assert (bundle / "config.json").read_bytes() == raw
    assert os.stat(bundle / "config.json").st_ino == before.st_ino


def test_malformed_edits_fail_the_create_naming_the_file_and_field(dra):
    path = dra["dra"] / POD_UID / "main.json"
    path.parent.mkdir(parents=True)
    bundle = dra["bundle"]
    raw = _write_spec(bundle, _annotated(_spec()))
    log = bundle / "log.json"
    path.write_text(json.dumps({"env": {}, "mounts": [{"containerPath": "/x", "hostPath": "y", "readOnly": True}]}))
    result = _run(dra, "--log", str(log), "create", "--bundle", str(bundle), "cid")
    assert result.returncode == 1
    assert f"gpushare-mock-runtime: DRA edits {path}: mounts[0].hostPath must be an absolute path, got 'y'" in (
        result.stderr
    )
    assert "mounts[0].hostPath" in json.loads(log.read_text().splitlines()[-1])["msg"]
    path.write_text("{not json")
    result = _run(dra, "create", "--bundle", str(bundle), "cid")
    assert result.returncode == 1 and f"DRA edits {path}: not JSON" in result.stderr
    assert not dra["record"].exists(), "runc ran for a refused container"
    assert (bundle / "config.json").read_bytes() == raw


def test_a_symlinked_edits_file_is_refused(dra, tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"env": {"LD_PRELOAD": ""}, "mounts": []}))
    path = dra["dra"] / POD_UID / "main.json"
    path.parent.mkdir(parents=True)
    path.symlink_to(elsewhere)
    bundle = dra["bundle"]
    raw = _write_spec(bundle, _annotated(_spec()))
    result = _run(dra, "create", "--bundle", str(bundle), "cid")
    assert result.returncode == 1
    assert f"gpushare-mock-runtime: DRA edits {path}: a symbolic link, refused" in result.stderr
    assert (bundle / "config.json").read_bytes() == raw and not dra["record"].exists()


def test_edits_are_read_from_the_default_dir_unless_configured(installed, tmp_path):
    """Without dra-edits= the toolkit reads /var/run/gpushare-dra, not the configured dir."""
    write_edits(str(tmp_path / "dra"), POD_UID, "main", {"env": {"A": "1"}, "mounts": []})
    uid = f"{POD_UID}-nowhere"  # no such pod under the real default dir
    bundle = installed["bundle"]
    raw = _write_spec(bundle, _annotated(_spec(), uid=uid))
    assert _run(installed, "create", "--bundle", str(bundle), "cid").returncode == 0
    assert (bundle / "config.json").read_bytes() == raw
    assert rt.Config.load(str(installed["drv"])).dra_edits == "/var/run/gpushare-dra"


def test_dra_edits_conf_key_must_be_absolute(tmp_path):
    (tmp_path / "runtime.conf").write_text("runc=/r\ninventory=/i\ndra-edits=/srv/dra\n")
    assert rt.Config.load(str(tmp_path)).dra_edits == "/srv/dra"
    (tmp_path / "runtime.conf").write_text("runc=/r\ninventory=/i\ndra-edits=var/run/dra\n")
    with pytest.raises(rt.ToolkitError, match=r"dra-edits= must be an absolute path, got 'var/run/dra'"):
        rt.Config.load(str(tmp_path))


def _runc_state(root: Path, container: str, bundle: Path) -> Path:
    """runc's state file of a running container, as ``runc create`` leaves it (trimmed)."""
    state = root / container / "state.json"
    state.parent.mkdir(parents=True)
    state.write_text(
        json.dumps(
            {
                "id": container,
                "init_process_pid": 4242,
                "config": {"rootfs": str(bundle / "rootfs"), "labels": [f"bundle={bundle}"]},
            }
        )
    )
    return state


def test_exec_into_a_dra_container_gets_the_edits_env(dra, tmp_path):
    edits = _plugin_edits(tmp_path, 1)
    write_edits(str(dra["dra"]), POD_UID, "main", edits)
    bundle = dra["bundle"]
    _write_spec(bundle, _annotated(_spec()))
    assert _run(dra, "create", "--bundle", str(bundle), "cid").returncode == 0
    root = tmp_path / "runc-root"
    _runc_state(root, "cid", bundle)
    # What containerd hands runc for kubectl exec: the ORIGINAL spec's env, the pod's own.
    process_file = tmp_path / "runc-process789"
    process_file.write_text(json.dumps(_process("PATH=/usr/bin", "LD_PRELOAD=")))
    # An option this program does not know, with a value, before the id (runc 1.2's
    # --pidfd-socket): the id is still the last argument.
    args = ["--root", str(root), "exec", "--process", str(process_file), "--pidfd-socket", "/run/x.sock", "cid"]
    result = _run(dra, *args)
    assert result.returncode == 0, result.stderr
    assert _called(dra) == args
    env = _env({"process": json.loads(process_file.read_text())})
    assert {k: env[k] for k in edits["env"]} == edits["env"]
    assert env["GPUSHARE_MOCK_INVENTORY"] == str(dra["inventory"])
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"


def test_exec_into_a_container_runc_does_not_know_or_without_edits_is_untouched(dra, tmp_path):
    bundle = dra["bundle"]
    _write_spec(bundle, _annotated(_spec(), name="sidecar"))
    root = tmp_path / "runc-root"
    _runc_state(root, "plain", bundle)
    process_file = tmp_path / "runc-process1"
    raw = json.dumps(_process("PATH=/usr/bin"), indent=2).encode()
    process_file.write_bytes(raw)
    for container in ("plain", "gone"):
        result = _run(dra, "--root", str(root), "exec", "-p", str(process_file), container)
        assert result.returncode == 0, result.stderr
        assert process_file.read_bytes() == raw


def test_exec_with_a_state_file_or_bundle_that_cannot_be_read_fails(dra, tmp_path):
    root = tmp_path / "runc-root"
    state = _runc_state(root, "cid", tmp_path / "no-bundle")
    process_file = tmp_path / "runc-process2"
    process_file.write_text(json.dumps(_process("PATH=/usr/bin")))
    result = _run(dra, "--root", str(root), "exec", "-p", str(process_file), "cid")
    assert result.returncode == 1
    assert f"cannot read the OCI spec {tmp_path / 'no-bundle' / 'config.json'}" in result.stderr
    state.write_text(json.dumps({"id": "cid", "config": {"labels": []}}))
    result = _run(dra, "--root", str(root), "exec", "-p", str(process_file), "cid")
    assert result.returncode == 1
    assert f"gpushare-mock-runtime: {state}: no bundle=PATH label in config.labels" in result.stderr
    state.unlink()
    state.mkdir()  # there, but not readable as a file
    result = _run(dra, "--root", str(root), "exec", "-p", str(process_file), "cid")
    assert result.returncode == 1 and f"cannot read runc's state {state}: Is a directory" in result.stderr
    assert not dra["record"].exists(), "runc ran an exec without its share"
