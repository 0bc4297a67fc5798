"""The device plugin re-registers when the kubelet restarts (its socket is recreated).

A restarted kubelet deletes every plugin socket and forgets registered resources; a
device plugin that does not notice leaves the node advertising no GPU memory. This
restarts the real kubelet of the local cluster and checks the same plugin process
(same pod, no container restart) brings `aliyun.com/gpu-mem` back and serves a share.
"""

from __future__ import annotations

import pytest

from gpushare_conformance.allocation import card_totals_mib, check_card_count, check_card_total
from gpushare_conformance.fixtures.framework.wait import poll_until

pytestmark = [pytest.mark.e2e, pytest.mark.lifecycle, pytest.mark.disruptive]

PLUGIN_SELECTOR = "app=gpushare-device-plugin"
RESOURCE = "aliyun.com/gpu-mem"


def _plugin_pod(kube) -> tuple[str, int]:
    pods = kube.core.list_namespaced_pod("gpushare-system", label_selector=PLUGIN_SELECTOR).items
    assert len(pods) == 1, f"expected one device plugin pod, found {[p.metadata.name for p in pods]}"
    pod = pods[0]
    restarts = sum(s.restart_count for s in (pod.status.container_statuses or []))
    return pod.metadata.uid, restarts


def _allocatable(kube, node: str) -> int:
    return int((kube.core.read_node(node).status.allocatable or {}).get(RESOURCE, "0"))


def _reregistered(kube, pod_uid: str) -> bool:
    """The plugin's log shows it saw the new kubelet socket and registered again (an
    unreadable log, while the restarted kubelet is not serving yet, counts as not yet)."""
    pods = [
        p
        for p in kube.core.list_namespaced_pod("gpushare-system", label_selector=PLUGIN_SELECTOR).items
        if p.metadata.uid == pod_uid
    ]
    if not pods:
        return False
    log = kube.kubectl(
        "logs",
        pods[0].metadata.name,
        "-n",
        "gpushare-system",
        "-c",
        "device-plugin",
        "--tail=-1",
        check=False,
        timeout=60,
    )
    _, _, after = log.rpartition("was recreated (kubelet restart); registering again")
    return bool(after) and f"registered {RESOURCE}" in after


def _heartbeat(kube, node: str):
    """When the kubelet last reported the node's status (the Ready condition's heartbeat)."""
    ready = [c for c in kube.core.read_node(node).status.conditions or [] if c.type == "Ready"]
    return ready[0].last_heartbeat_time if ready else None


def _reported_since(kube, node: str, since, want: int) -> bool:
    """A status report newer than `since` shows `want` GiB: the node object keeps the
    old figure until the restarted kubelet reports, so an old figure proves nothing."""
    beat = _heartbeat(kube, node)
    return beat is not None and since is not None and beat > since and _allocatable(kube, node) == want


def test_device_plugin_reregisters_after_kubelet_restart(cluster, suite) -> None:
    if cluster.provider != "local":
        pytest.skip("restarting the kubelet needs the local provider")
    from gpushare_conformance.fixtures.providers.local import LocalProvider

    kube, node = suite.kube, suite.node.node
    before = _allocatable(kube, node)
    assert before > 0, f"{RESOURCE} not advertised before the restart"
    uid, restarts = _plugin_pod(kube)
    last_report = _heartbeat(kube, node)

    LocalProvider(state_dir=cluster.details["state_dir"]).restart_component("kubelet", print)
    poll_until(
        lambda: _reregistered(kube, uid),
        bool,
        timeout=suite.timeouts.restart,
        what="the device plugin to log registering again after the kubelet restart",
    )
    poll_until(
        lambda: _reported_since(kube, node, last_report, before),
        bool,
        timeout=suite.timeouts.restart,
        what=f"a kubelet report after the restart showing {RESOURCE}={before}",
        describe=lambda _ok: f"{RESOURCE}={_allocatable(kube, node)}, last report {_heartbeat(kube, node)}",
    )
    assert _plugin_pod(kube) == (uid, restarts), (
        "the device plugin pod was replaced or restarted instead of re-registering"
    )

    pod = suite.submit_share_pod("after-restart", 4, 2)
    suite.wait_running(pod)
    report = suite.nvidia_smi_exec(pod)
    suite.expect(check_card_count(len(report.gpus), 2))
    for visible, seen in sorted(card_totals_mib(report).items()):
        suite.expect(check_card_total(seen, 2, suite.physical_mib(suite.pod(pod), visible)))
