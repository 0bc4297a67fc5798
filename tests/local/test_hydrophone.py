"""The suite as a Kubernetes conformance image, run the way conformance is run: by
hydrophone (built from its Go module, ci/build-hydrophone.sh), against the local cluster.

hydrophone starts the suite image as uid 65534 with every capability dropped beside its
busybox output container, tells it the selection through E2E_FOCUS/E2E_SKIP, follows its
log, copies /tmp/results/{e2e.log,junit_01.xml} back through the busybox container and
exits with the conformance container's status. The checks inside run with
``--gpushare-cluster in-cluster``; what they judge is the stack this session's provider
deployed. hydrophone's own role allows everything: the test gives its service account
the suite's documented role instead (manifests/in-cluster/rbac.yaml, ``rbac --print``),
created beforehand under hydrophone's names and kept by ``--skip-preflight``, so the
run also proves that role is enough.
"""

from __future__ import annotations

import subprocess
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from gpushare_conformance.images.build import REPO, build_images
from gpushare_conformance.images.oci import import_archives
from gpushare_conformance.images.suite import BUSYBOX_IMAGE, SUITE_IMAGE

# Three checks focused, one of them skipped again: both variables must reach the pod.
FOCUS = (
    "test_seed_job_gets_4gib_on_each_of_2_cards|test_gpu_mem_not_divisible_by_gpu_count_is_not_scheduled"
    "|test_node_advertising_matches_nvml_inventory"
)
SKIP = r"\[isolation\]"  # the marker test_node_advertising_matches_nvml_inventory carries
EXPECTED = {"test_seed_job_gets_4gib_on_each_of_2_cards", "test_gpu_mem_not_divisible_by_gpu_count_is_not_scheduled"}
NAMESPACE = "gpushare-hydrophone"
HYDROPHONE_POD = "e2e-conformance-test"  # the pod hydrophone creates (its pkg/conformance/const.go)


def _documented_identity(namespace: str) -> str:
    """hydrophone's namespace, service account, role and binding (names from its
    source, pkg/conformance/const.go), the role's rules the suite's documented ones."""
    from gpushare_conformance.commands.rbac import RBAC_MANIFEST

    rules = next(d for d in yaml.safe_load_all(RBAC_MANIFEST.read_text()) if d["kind"] == "ClusterRole")["rules"]
    account = "conformance-serviceaccount"
    role, binding = f"conformance-serviceaccount:{namespace}", f"conformance-serviceaccount-role:{namespace}"
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": namespace}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        },
    ]
    return yaml.safe_dump_all(objects)


def _hydrophone() -> Path:
    result = subprocess.run(
        ["bash", str(REPO / "ci" / "build-hydrophone.sh")], stdout=subprocess.PIPE, text=True, check=True
    )
    return Path(result.stdout.strip().splitlines()[-1])


def _run_hydrophone(kubectl: list[str], argv: list[str], timeout: float = 900) -> subprocess.CompletedProcess:
    """hydrophone ``argv``, its output (stdout and stderr) kept. Once it has the results
    and deletes its namespace, its pod is deleted with a 1 s grace: the output container
    runs ``sleep infinity`` as its first process, which SIGTERM does not stop, so the
    pod's 30 s grace held hydrophone's own clean-up about 40 s."""
    lines: list[str] = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as child:
        timer = threading.Timer(timeout, child.kill)
        timer.start()
        try:
            for line in child.stdout:
                lines.append(line)
                if f"Waiting for Namespace {NAMESPACE} to be deleted" in line:
                    delete = [*kubectl, "-n", NAMESPACE, "delete", "pod", HYDROPHONE_POD, "--grace-period=1"]
                    subprocess.run([*delete, "--ignore-not-found", "--wait=false"], capture_output=True, timeout=60)
        finally:
            timer.cancel()
    return subprocess.CompletedProcess(argv, child.returncode, "".join(lines), "")


@pytest.mark.e2e
def test_hydrophone_runs_the_suite_image(cluster, placement, tmp_path):
    """Runs alone (no capacity declared): the checks in the pod use the session's cards."""
    if cluster.provider != "local":
        pytest.skip("imports the suite image into the local provider's containerd")
    from gpushare_conformance.fixtures.providers.local import LocalProvider

    hydrophone = _hydrophone()
    paths = LocalProvider(state_dir=cluster.details["state_dir"]).paths
    # Into the provider's own image folder: an archive whose image is unchanged is not
    # written again (the stack's 500 MB one, built there at bring-up), nor imported again.
    built = build_images(paths.images, REPO / "native" / "build", print, suite=True)
    socket = paths.containerd_socket
    import_archives(["ctr", "--address", str(socket), "-n", "k8s.io"], [built.suite, built.busybox], print)
    out = tmp_path / "results"
    base = [str(hydrophone), "--kubeconfig", str(cluster.kubeconfig), "--namespace", NAMESPACE]
    kubectl = cluster.kubectl_args()
    try:
        subprocess.run([*kubectl, "apply", "-f", "-"], input=_documented_identity(NAMESPACE), text=True, check=True)
        who = f"--as=system:serviceaccount:{NAMESPACE}:conformance-serviceaccount"
        can = subprocess.run([*kubectl, "auth", "can-i", who, "create", "clusterroles"], capture_output=True, text=True)
        assert can.stdout.strip() == "no", f"the run's account is not held to the documented role: {can.stdout}"
        run = _run_hydrophone(
            kubectl,
            [
                *base,
                "--skip-preflight",
                NAMESPACE,
                "--conformance-image",
                SUITE_IMAGE,
                "--busybox-image",
                BUSYBOX_IMAGE,
                "--focus",
                FOCUS,
                "--skip",
                SKIP,
                "--extra-args",
                "--gpushare-mock-nvml=true",
                "--output-dir",
                str(out),
            ],
        )
    finally:
        subprocess.run([*base, "--cleanup"], capture_output=True, timeout=300, check=False)
    print(run.stdout)  # hydrophone's own account of the run, in the report
    shown = run.stdout[-6000:]
    assert run.returncode == 0, shown
    log = (out / "e2e.log").read_text()
    assert log.startswith("Will run 2 of "), log[:500]
    cases = {c.get("name"): c for c in ET.parse(out / "junit_01.xml").iter("testcase")}
    assert set(cases) == EXPECTED, (sorted(cases), shown)
    for name, case in cases.items():
        outcome = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        assert not outcome, (name, outcome, shown)
