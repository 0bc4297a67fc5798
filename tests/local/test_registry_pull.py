"""Images from a registry: `images push` copies an archive `images build` makes to a real
registry (Debian's docker-registry, on 127.0.0.1), and the node pulls it from there.

A cluster the suite did not start cannot be given archives, so `run --image-registry`
names REGISTRY/gpushare-conformance/<name>:<tag>; this is that path end to end on the
local node: the registry's log shows containerd asking for the manifest, and the pod's
imageID names the registry. containerd's CRI reaches a loopback registry over plain
HTTP without configuration (it defaults localhost and 127.0.0.1 to http).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpushare_conformance.images.build import PAUSE_IMAGE, _pause_layer
from gpushare_conformance.images.oci import ImageConfig, write_archive
from gpushare_conformance.images.registry import registry_ref

DOCKER_REGISTRY = Path("/usr/bin/docker-registry")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_registry(tmp_path: Path) -> tuple[subprocess.Popen, str, Path]:
    """docker-registry serving a fresh store on 127.0.0.1; its process, address and log."""
    port = _free_port()
    config = tmp_path / "registry.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: info\n"
        f"storage:\n  filesystem:\n    rootdirectory: {tmp_path / 'store'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = tmp_path / "registry.log"
    with open(log, "w") as out:
        process = subprocess.Popen([str(DOCKER_REGISTRY), "serve", str(config)], stdout=out, stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://{address}/v2/", timeout=2):
                return process, address, log
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(f"docker-registry did not serve on {address}: {log.read_text()[-2000:]}") from None
            time.sleep(0.2)


def _manifest_requests(log: Path, name: str) -> list[str]:
    """The registry log's lines where containerd asked for a manifest of the suite's image ``name``."""
    return [
        line
        for line in log.read_text().splitlines()
        if f" /v2/gpushare-conformance/{name}/manifests/" in line and '"containerd/' in line
    ]


def _pause_archive(directory: Path) -> Path:
    """The pause image as `images build` writes it (small: a static binary)."""
    directory.mkdir()
    return write_archive(
        [_pause_layer(directory, lambda m: None)],
        ImageConfig(entrypoint=["/pause"]),
        [PAUSE_IMAGE],
        directory / "pause.oci.tar",
    )


def _pod(name: str, node: str, image: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,  # the node on this host: the only one that reaches 127.0.0.1
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "pause", "image": image, "imagePullPolicy": "Always"}],
        },
    }


@pytest.mark.e2e
@pytest.mark.capacity(cards=0)
def test_a_pushed_image_is_pulled_from_the_registry(cluster, kube, namespace, tmp_path):
    if not DOCKER_REGISTRY.is_file():
        pytest.skip(f"{DOCKER_REGISTRY} missing (Debian's docker-registry, ci/host-packages.txt)")
    from gpushare_conformance.fixtures.providers.local import LocalProvider

    local = LocalProvider()
    if local.node not in {n["metadata"]["name"] for n in kube.nodes()}:
        pytest.skip(f"no node {local.node} on this host: a registry on 127.0.0.1 is reachable only from there")
    archives = _pause_archive(tmp_path / "images").parent
    process, address, log = _start_registry(tmp_path)
    image = registry_ref(PAUSE_IMAGE, address)
    pulled = [image]  # and the name by digest the CRI adds
    try:
        push = subprocess.run(
            [sys.executable, "-m", "gpushare_conformance", "images", "push", address, "--insecure", "--out", archives],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert push.returncode == 0, push.stderr
        assert push.stdout.split() == [image], push.stdout

        kube.core.create_namespaced_pod(namespace, _pod("from-registry", local.node, image))
        deadline = time.monotonic() + 120
        while True:
            pod = kube.pod(namespace, "from-registry")
            statuses = pod["status"].get("container_statuses") or pod["status"].get("containerStatuses") or []
            running = statuses and (statuses[0].get("state") or {}).get("running")
            if running or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert running, f"the pod did not run {image}: {pod['status']}"
        image_id = statuses[0].get("image_id") or statuses[0].get("imageID") or ""
        pulled.append(image_id)
        assert image_id.startswith(f"{address}/gpushare-conformance/pause@sha256:"), image_id
        pulls = _manifest_requests(log, "pause")
        assert pulls, f"containerd fetched no manifest from the registry: {log.read_text()[-2000:]}"
    finally:
        process.terminate()
        process.wait(timeout=30)
        kube.kubectl("-n", namespace, "delete", "pod", "from-registry", "--ignore-not-found", "--wait=false")
        _forget(local.paths.containerd_socket, pulled)


def _forget(socket_path: Path, refs: list[str]) -> None:
    """Remove the pulled names from the node's store (the registry and its port are gone)."""
    if socket_path.exists():
        ctr = ["ctr", "--address", str(socket_path), "-n", "k8s.io", "images", "rm"]
        subprocess.run([*ctr, *filter(None, refs)], capture_output=True, check=False)


@pytest.mark.e2e
def test_the_checks_pods_come_from_the_registry_with_the_image_registry_option(cluster, kube, placement, tmp_path):
    """`--gpushare-image-registry` end to end: the stack/workload archive the local
    provider built is pushed, and the seed check, run through the existing provider
    (as on a real cluster), starts its Job from the registry's name of the mock
    workload (the mock overlay rendered and rewritten). Runs alone (no capacity declared)."""
    if not DOCKER_REGISTRY.is_file():
        pytest.skip(f"{DOCKER_REGISTRY} missing (Debian's docker-registry, ci/host-packages.txt)")
    from gpushare_conformance.fixtures.providers.local import LocalProvider

    local = LocalProvider()
    app = local.paths.images / "gpushare-app.oci.tar"
    if local.node not in {n["metadata"]["name"] for n in kube.nodes()} or not app.is_file():
        pytest.skip(f"needs the local cluster's node {local.node} and the archive its provider built ({app})")
    archives = tmp_path / "images"
    archives.mkdir()
    (archives / app.name).symlink_to(app)
    process, address, log = _start_registry(tmp_path)
    try:
        push = subprocess.run(
            [sys.executable, "-m", "gpushare_conformance", "images", "push", address, "--insecure", "--out", archives],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert push.returncode == 0, push.stderr
        junit = tmp_path / "junit.xml"
        child = subprocess.run(
            [
                sys.executable, "-m", "pytest", "--pyargs", "gpushare_conformance.conformance", "-q",
                "-p", "no:cacheprovider", "--gpushare-cluster", "existing",
                "--gpushare-cluster-kubeconfig", str(cluster.kubeconfig), "--gpushare-mock-nvml",
                "--gpushare-image-registry", address, "-k", "test_seed_job_gets_4gib_on_each_of_2_cards",
                "--junitxml", str(junit), "--gpushare-report-dir", str(tmp_path / "report"),
            ],
            cwd=tmp_path, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-2000:]
        cases = list(ET.parse(junit).iter("testcase"))
        outcomes = [c.tag for case in cases for c in case if c.tag in ("failure", "error", "skipped")]
        assert len(cases) == 1 and not outcomes, junit.read_text()[:2000]  # ran, and passed
        pulls = _manifest_requests(log, "tf-mnist-mock")
        assert pulls, f"the check's Job did not ask the registry for its image: {log.read_text()[-2000:]}"
    finally:
        process.terminate()
        process.wait(timeout=30)
        names = subprocess.run(
            ["ctr", "--address", str(local.paths.containerd_socket), "-n", "k8s.io", "images", "ls", "-q"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        _forget(local.paths.containerd_socket, [n for n in names if n.startswith(f"{address}/")])
