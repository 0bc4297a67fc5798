"""The mock node's container toolkit: the runtime, not the stack, provides the driver.

On the local cluster containerd runs every container through
native/toolkit/gpushare-mock-runtime. A pod whose environment asks for a card with
NVIDIA_VISIBLE_DEVICES (and no device plugin resource at all) must find the mock NVML
where a driver install puts it and see exactly that card in nvidia-smi when it is
privileged (the node's toolkit ignores an unprivileged container's variable, as the
reference stack sets its nodes up); a plain pod, a `void` pod and an unprivileged pod
naming a card must find no driver file; a card the node lacks must fail the container's
creation with the mock's words. The installer is checked without a cluster.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpushare_conformance import native
from gpushare_conformance.evidence import parse_nvidia_smi
from gpushare_conformance.fixtures.framework import evidence, submit
from gpushare_conformance.fixtures.framework.wait import poll_until
from gpushare_conformance.fixtures.providers.local import mockdriver
from gpushare_conformance.fixtures.providers.local.cluster import DEFAULT_INVENTORY, MOCK_TOOLKIT
from gpushare_conformance.fixtures.providers.toolkit_conf import LAUNCHER

DRIVER_FILES = (
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/local/nvidia/lib64/libnvidia-ml.so.1",
    "/usr/local/nvidia/lib64/libcuda.so.1",
    "/usr/bin/nvidia-smi",
    "/etc/gpushare/inventory.yaml",
)
# dlopen by soname alone, with no LD_LIBRARY_PATH: the loader's default search must find it.
DLOPEN = (
    "env",
    "-u",
    "LD_LIBRARY_PATH",
    "python3",
    "-c",
    "import ctypes; ctypes.CDLL('libnvidia-ml.so.1'); ctypes.CDLL('libcuda.so.1'); print('dlopen ok')",
)


# ------------------------------------------------------------------ installer (no cluster)
@pytest.fixture(scope="module")
def native_build() -> Path:
    return native.ensure_built()


def test_installer_lays_out_the_driver_and_a_working_wrapper(tmp_path, native_build):
    driver, inventory = tmp_path / "driver", tmp_path / "etc" / "inventory.yaml"
    wrapper = mockdriver.install(
        native_build, MOCK_TOOLKIT, DEFAULT_INVENTORY, driver_dir=driver, inventory_path=inventory
    )
    assert wrapper == driver / "bin" / "gpushare-mock-runtime" and os.access(wrapper, os.X_OK)
    for rel in mockdriver.DRIVER_FILES:
        assert (driver / rel).read_bytes() == (native_build / rel).read_bytes()
    assert wrapper.read_bytes() == (native_build / LAUNCHER).read_bytes()
    assert mockdriver.toolkit_program_path(driver).read_bytes() == MOCK_TOOLKIT.read_bytes()
    assert inventory.read_text() == DEFAULT_INVENTORY.read_text()
    conf = (driver / "runtime.conf").read_text()
    assert f"inventory={inventory}\n" in conf and "runc=/" in conf
    # Closed: cards only to what the device plugin mounted, as the reference stack's nodes.
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged=false\n" in conf, conf
    assert "accept-nvidia-visible-devices-as-volume-mounts=true\n" in conf, conf
    out = subprocess.run([str(wrapper), "--version"], stdout=subprocess.PIPE, text=True, check=True).stdout
    assert out.startswith("runc version")


def test_installer_refuses_a_missing_driver_file_and_a_wrapper_as_runc(tmp_path, native_build):
    with pytest.raises(mockdriver.MockDriverError, match=r"libnvidia-ml.so.1 is missing \(run `make -C native`\)"):
        mockdriver.install(
            tmp_path / "empty",
            MOCK_TOOLKIT,
            DEFAULT_INVENTORY,
            driver_dir=tmp_path / "d",
            inventory_path=tmp_path / "i.yaml",
        )
    driver = tmp_path / "d"
    with pytest.raises(mockdriver.MockDriverError, match=r"the wrapper itself"):
        mockdriver.install(
            native_build,
            MOCK_TOOLKIT,
            DEFAULT_INVENTORY,
            driver_dir=driver,
            inventory_path=tmp_path / "i.yaml",
            runc=str(driver / "bin" / "gpushare-mock-runtime"),
        )


# ------------------------------------------------------------------ on the local cluster
def _pod(name: str, image: str, visible: str | None, privileged: bool = False) -> dict:
    """A pod naming cards in its environment; the local node's toolkit is closed
    (fixtures/providers/toolkit_conf.py), so only a privileged one gets them."""
    env = [] if visible is None else [{"name": "NVIDIA_VISIBLE_DEVICES", "value": visible}]
    security = {"securityContext": {"privileged": True}} if privileged else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {submit.SUITE_LABEL: "true"}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sleep", "3600"],
                    "env": env,
                    **security,
                }
            ],
        },
    }


def _exec(suite, pod: str, *argv: str) -> evidence.ExecResult:
    return evidence.exec_in_pod(suite.kube, suite.namespace, pod, list(argv))


def _host_nvidia_smi_list(inventory: str, visible: str) -> str:
    build = native.native_dir()
    env = {
        "PATH": "/usr/bin:/bin",
        "GPUSHARE_MOCK_INVENTORY": inventory,
        "NVIDIA_VISIBLE_DEVICES": visible,
        "LD_LIBRARY_PATH": str(native.lib_dir(build)),
    }
    return subprocess.run(
        [str(native.bin_dir(build) / "nvidia-smi"), "-L"], env=env, stdout=subprocess.PIPE, text=True, check=True
    ).stdout


@pytest.mark.e2e
def test_runtime_gives_the_driver_to_gpu_containers_only(cluster, suite) -> None:
    if cluster.provider != "local":
        pytest.skip("the mock container toolkit is installed by the local provider")
    image = submit.MOCK_IMAGE
    pods = {"gpu": "toolkit-gpu", "plain": "toolkit-plain", "void": "toolkit-void", "unprivileged": "toolkit-unpriv"}
    for kind, visible in (("gpu", "1"), ("plain", None), ("void", "void"), ("unprivileged", "1")):
        submit.create(suite.kube, suite.namespace, _pod(pods[kind], image, visible, privileged=kind == "gpu"))
    for name in pods.values():
        suite.wait_running(name)
    # No device plugin took part: the pod asked for no extended resource and got no Allocate env.
    gpu_env = suite.env(pods["gpu"])
    assert "ALIYUN_COM_GPU_MEM_IDX" not in gpu_env and "LD_PRELOAD" not in gpu_env, gpu_env

    # The GPU pod: the driver files where a driver install puts them, found by soname.
    listed = _exec(suite, pods["gpu"], "ls", "-l", *DRIVER_FILES)
    assert listed.exit_status == 0, f"driver files missing in the GPU pod:\n{listed.output}"
    loaded = _exec(suite, pods["gpu"], *DLOPEN)
    assert loaded.exit_status == 0 and "dlopen ok" in loaded.stdout, loaded.output
    assert gpu_env.get("GPUSHARE_MOCK_INVENTORY") == "/etc/gpushare/inventory.yaml", gpu_env
    assert "/usr/local/nvidia/lib64" in gpu_env.get("LD_LIBRARY_PATH", "").split(":"), gpu_env

    # nvidia-smi shows exactly the one card named, physical card 1 of the node's inventory.
    smi = _exec(suite, pods["gpu"], "nvidia-smi")
    assert smi.exit_status == 0, smi.output
    report = parse_nvidia_smi(smi.stdout)
    assert len(report.gpus) == 1, (
        f"nvidia-smi shows {len(report.gpus)} cards for NVIDIA_VISIBLE_DEVICES=1:\n{smi.stdout}"
    )
    in_pod = _exec(suite, pods["gpu"], "nvidia-smi", "-L")
    assert in_pod.stdout == _host_nvidia_smi_list(cluster.details["inventory"], "1"), in_pod.output

    # The plain and void pods, and the unprivileged one that names a card itself on a
    # node whose toolkit reads cards only from the device plugin's mounts: nothing of the driver.
    for kind in ("plain", "void", "unprivileged"):
        name = pods[kind]
        present = _exec(
            suite,
            name,
            "sh",
            "-c",
            "for f in " + " ".join(DRIVER_FILES) + " /usr/local/nvidia; do [ -e $f ] && echo $f; done; "
            "command -v nvidia-smi; true",
        )
        assert present.stdout.strip() == "", f"{kind} pod has driver files:\n{present.output}"
        assert _exec(suite, name, *DLOPEN).exit_status != 0, f"{kind} pod can dlopen libnvidia-ml.so.1"
        if kind == "unprivileged":
            # An exec'd process that names cards is given the mock's two variables (the
            # toolkit sees its environment only); without the files they reach nothing.
            continue
        env = suite.env(name)
        assert "GPUSHARE_MOCK_INVENTORY" not in env and "LD_LIBRARY_PATH" not in env, env


@pytest.mark.e2e
def test_a_card_the_node_lacks_fails_the_container_with_the_mocks_words(cluster, suite) -> None:
    if cluster.provider != "local":
        pytest.skip("the mock container toolkit is installed by the local provider")
    name = "toolkit-bad-card"
    submit.create(suite.kube, suite.namespace, _pod(name, submit.MOCK_IMAGE, "7", privileged=True))

    def container_error() -> str:
        """The container's error: waiting (kubelet retrying) or terminated with StartError
        (restartPolicy Never); "RUNNING" if it started after all."""
        statuses = (suite.pod(name).get("status") or {}).get("containerStatuses") or []
        states = [s.get("state") or {} for s in statuses]
        if any(st.get("running") for st in states):
            return "RUNNING"
        reports = [st.get("waiting") or st.get("terminated") or {} for st in states]
        return " ".join(f"{r.get('reason')}: {r.get('message')}" for r in reports if r.get("message"))

    message = poll_until(
        container_error,
        lambda m: "gpushare-mock-runtime" in m,
        final=lambda m: "the container started" if m == "RUNNING" else None,
        timeout=90,
        what=f"pod {name} to fail creating its container",
        progress=suite.progress,
    )
    assert "NVIDIA_VISIBLE_DEVICES='7' is refused by the mock driver" in message, message
    assert "no card '7' in the inventory" in message, message
