"""The kind provider's pieces that need no Docker: its kind configuration, the mock
driver it mounts into GPU workers, the runc wrapper Docker runs node containers with,
and the node image's shell scripts."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from gpushare_conformance.fixtures.providers import get_provider
from gpushare_conformance.fixtures.providers import kind as kindp
from gpushare_conformance.fixtures.providers.extender_tls import ensure_extender_pki

REPO = Path(__file__).resolve().parents[2]
RUNC_WRAPPER = REPO / "ci" / "kind" / "gpushare-runc"
NODE = REPO / "ci" / "kind" / "node"


def _workers(tmp_path: Path) -> list[kindp.GpuWorker]:
    return [
        kindp.GpuWorker(inventory=kindp.DEFAULT_INVENTORY, state=tmp_path / "worker-1"),
        kindp.GpuWorker(inventory=kindp.SECOND_INVENTORY, state=tmp_path / "worker-2"),
    ]


def test_config_has_control_plane_and_gpu_workers_with_their_own_mounts(tmp_path):
    config = kindp.kind_config(tmp_path / "sched.yaml", _workers(tmp_path))
    roles = [n["role"] for n in config["nodes"]]
    assert roles == ["control-plane", "worker", "worker"]
    cp, w1, w2 = config["nodes"]
    assert "labels" not in cp, "the control plane must not be a GPU node"
    for worker, name in ((w1, "worker-1"), (w2, "worker-2")):
        assert worker["labels"] == {"gpushare": "true"}
        mounts = {m["containerPath"]: m["hostPath"] for m in worker["extraMounts"]}
        assert mounts[kindp.NODE_INVENTORY_PATH] == str(tmp_path / name / "inventory.yaml")
        assert mounts[kindp.NODE_DRIVER_DIR] == str(tmp_path / name / "mock-driver")


def test_inventories_are_writable_and_the_drivers_read_only(tmp_path):
    """A run of the ``existing`` provider turns a card sick by writing the node's
    inventory through a privileged pod; the mock driver stays the node's own."""
    for worker in kindp.kind_config(tmp_path / "sched.yaml", _workers(tmp_path))["nodes"][1:]:
        read_only = {m["containerPath"]: m.get("readOnly", False) for m in worker["extraMounts"]}
        assert read_only == {kindp.NODE_INVENTORY_PATH: False, kindp.NODE_DRIVER_DIR: True}


def test_a_one_node_cluster_puts_the_gpus_on_its_control_plane(tmp_path):
    gpu = _workers(tmp_path)[0]
    config = kindp.kind_config(tmp_path / "sched.yaml", [], gpu_control_plane=gpu)
    (cp,) = config["nodes"]
    assert cp["role"] == "control-plane" and "labels" not in cp, "the stack deployed on it labels it"
    mounts = {m["containerPath"]: m["hostPath"] for m in cp["extraMounts"]}
    assert mounts == {
        kindp.SCHEDULER_CONFIG_PATH: str(tmp_path / "sched.yaml"),
        kindp.NODE_INVENTORY_PATH: str(tmp_path / "worker-1" / "inventory.yaml"),
        kindp.NODE_DRIVER_DIR: str(tmp_path / "worker-1" / "mock-driver"),
    }
    provider = kindp.KindProvider(
        cluster_name="peers",
        worker_inventories=[kindp.DEFAULT_INVENTORY, kindp.SECOND_INVENTORY],
        gpu_control_plane=True,
    )
    assert provider.worker_inventories == [kindp.DEFAULT_INVENTORY], "one node: the first inventory only"
    assert provider.gpu_node_name(0) == "peers-control-plane"
    assert kindp.KindProvider(cluster_name="c").gpu_node_name(1) == "c-worker2"


def test_scheduler_patch_points_kube_scheduler_at_the_extender_config(tmp_path):
    config = kindp.kind_config(tmp_path / "sched.yaml", [])
    patches = [yaml.safe_load(p) for p in config["nodes"][0]["kubeadmConfigPatches"]]
    cluster = next(p for p in patches if p["kind"] == "ClusterConfiguration")
    assert {"name": "config", "value": kindp.SCHEDULER_CONFIG_PATH} in cluster["scheduler"]["extraArgs"]
    assert cluster["scheduler"]["extraVolumes"][0]["hostPath"] == kindp.SCHEDULER_CONFIG_PATH
    init = next(p for p in patches if p["kind"] == "InitConfiguration")
    assert init["skipPhases"] == ["preflight", "addon/coredns"]
    sched = kindp.scheduler_config(ensure_extender_pki(tmp_path / "pki"))
    extender = sched["extenders"][0]
    assert extender["urlPrefix"].startswith("https://127.0.0.1:32766")
    assert "__" not in json.dumps(sched)


def test_two_inventories_differ_v100_and_t4():
    first = yaml.safe_load(kindp.DEFAULT_INVENTORY.read_text())["gpus"]
    second = yaml.safe_load(kindp.SECOND_INVENTORY.read_text())["gpus"]
    assert [(g["name"], g["memory_mib"]) for g in first] == [("Tesla V100-SXM2-16GB", 16160)] * 4
    assert [(g["name"], g["memory_mib"]) for g in second] == [("Tesla T4", 15360)] * 2


def test_mock_driver_staging_has_the_toolkit_layout(tmp_path):
    native = tmp_path / "native"
    for rel in (*kindp.DRIVER_FILES, kindp.LAUNCHER):
        (native / rel).parent.mkdir(parents=True, exist_ok=True)
        (native / rel).write_text(rel)
    toolkit = tmp_path / "gpushare-mock-runtime"
    toolkit.write_text("#!/usr/bin/python3 -IS\n")
    kindp.stage_mock_driver(native, toolkit, tmp_path / "driver")
    for rel in (*kindp.DRIVER_FILES, "bin/gpushare-mock-runtime", "libexec/gpushare-mock-runtime"):
        assert os.access(tmp_path / "driver" / rel, os.X_OK), rel
    # containerd runs the launcher; the launcher runs the program that edits a spec
    assert (tmp_path / "driver" / "bin" / "gpushare-mock-runtime").read_text() == kindp.LAUNCHER
    assert (tmp_path / "driver" / "libexec" / "gpushare-mock-runtime").read_text() == toolkit.read_text()
    conf = (tmp_path / "driver" / "runtime.conf").read_text()
    assert "runc=/usr/sbin/runc" in conf and f"inventory={kindp.NODE_INVENTORY_PATH}" in conf


def test_mock_driver_staging_names_a_missing_file(tmp_path):
    with pytest.raises(kindp.KindProviderError, match="libnvidia-ml.so.1 is missing"):
        kindp.stage_mock_driver(tmp_path, tmp_path / "toolkit", tmp_path / "driver")


def test_missing_inventory_is_a_clear_error(tmp_path):
    provider = get_provider("kind", {"inventory": tmp_path / "nope.yaml"})
    with pytest.raises(kindp.KindProviderError, match="nope.yaml"):
        provider.up(lambda m: None)


def test_kind_binary_option_must_name_an_executable(tmp_path):
    with pytest.raises(kindp.KindProviderError, match="--gpushare-kind-binary"):
        kindp.find_kind(str(tmp_path / "kind"))


def test_without_docker_the_error_names_what_is_missing(tmp_path):
    kind = tmp_path / "kind"
    kind.write_text("#!/bin/sh\nexit 0\n")
    kind.chmod(0o755)
    provider = kindp.KindProvider(kind_binary=str(kind), docker_binary=str(tmp_path / "docker"))
    with pytest.raises(kindp.KindProviderError, match=r"needs Docker: .*docker\.io"):
        provider.up(lambda m: None)


def _bounding_set_lacks(cap_bit: int) -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapBnd:"):
            return not (int(line.split()[1], 16) >> cap_bit) & 1
    return False


def _wrapper(tmp_path: Path, *args: str) -> str:
    """Run the wrapper with a fake runc that prints the file it was given."""
    fake = tmp_path / "runc"
    fake.write_text('#!/bin/sh\necho ran "$@"\n')
    fake.chmod(0o755)
    env = {**os.environ, "GPUSHARE_REAL_RUNC": str(fake)}
    return subprocess.run(
        ["sh", str(RUNC_WRAPPER), *args],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=True,
    ).stdout


CAPS = ["CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_NET_ADMIN"]


@pytest.mark.parametrize("form", ["compact", "pretty"])
def test_runc_wrapper_drops_exactly_the_capabilities_the_host_lacks(tmp_path, form):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    spec = {
        "process": {
            "capabilities": {k: list(CAPS) for k in ("bounding", "effective", "permitted")},
            "args": ["CAP_SYS_RESOURCE-is-an-argument-not-a-capability"],
        }
    }
    text = json.dumps(spec) if form == "compact" else json.dumps(spec, indent=2)
    (bundle / "config.json").write_text(text)
    out = _wrapper(tmp_path, "--root", "/x", "create", "--bundle", str(bundle), "ctr-1")
    assert out.startswith("ran --root /x create --bundle")
    edited = json.loads((bundle / "config.json").read_text())  # still valid JSON
    expected = [c for c in CAPS if not (c == "CAP_SYS_RESOURCE" and _bounding_set_lacks(24))]
    for key in ("bounding", "effective", "permitted"):
        assert edited["process"]["capabilities"][key] == expected
    assert edited["process"]["args"] == spec["process"]["args"]


def test_runc_wrapper_edits_the_exec_process_file(tmp_path):
    if not _bounding_set_lacks(24):
        pytest.skip("this host grants CAP_SYS_RESOURCE: the wrapper has nothing to drop (covered above)")
    process = tmp_path / "process.json"
    process.write_text(json.dumps({"capabilities": {"bounding": ["CAP_SYS_RESOURCE"]}}))
    _wrapper(tmp_path, "exec", "--process", str(process), "ctr-1")
    assert json.loads(process.read_text()) == {"capabilities": {"bounding": []}}


def test_runc_wrapper_leaves_other_commands_alone(tmp_path):
    (tmp_path / "config.json").write_text('["CAP_SYS_RESOURCE"]')
    assert _wrapper(tmp_path, "state", "ctr-1").strip() == "ran state ctr-1"
    assert (tmp_path / "config.json").read_text() == '["CAP_SYS_RESOURCE"]'


@pytest.mark.parametrize(
    "script", ["usr/local/bin/entrypoint", "usr/local/bin/gpushare-podnet", "usr/local/bin/gpushare-preload"]
)
def test_node_scripts_parse(script):
    shell = "bash" if (NODE / script).read_text().startswith("#!/bin/bash") else "sh"
    subprocess.run([shell, "-n", str(NODE / script)], check=True)


def test_gpu_containerd_config_only_adds_the_toolkit_runtime():
    base = (NODE / "etc/containerd/config.toml").read_text()
    gpu = (NODE / "etc/containerd/config-gpu.toml").read_text()
    assert 'default_runtime_name = "runc"' in base and "nvidia" not in base
    assert 'default_runtime_name = "nvidia"' in gpu
    assert f'BinaryName = "{kindp.NODE_DRIVER_DIR}/bin/gpushare-mock-runtime"' in gpu
    for line in (
        "restrict_oom_score_adj = true",
        'sandbox_image = "registry.k8s.io/pause:3.10.1"',
        "SystemdCgroup = true",
    ):
        assert line in base and line in gpu
