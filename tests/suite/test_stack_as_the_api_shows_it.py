"""What the suite reads of a stack comes from the API, not from a stack's habits: the
extender's addresses (its Services, its pods' ports, the host network), the device
plugin's container in a pod of several, and the API's answer when it refuses an exec."""

from __future__ import annotations

from kubernetes.client.exceptions import ApiException

from gpushare_conformance.fixtures.framework import extender
from gpushare_conformance.fixtures.framework.evidence import api_answer
from gpushare_conformance.fixtures.framework.stack import plugin_containers


def _pod(name: str, labels: dict, host_network: bool, ip: str, host_ip: str, ports: list[int]) -> dict:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "hostNetwork": host_network,
            "containers": [{"name": "c", "ports": [{"containerPort": p} for p in ports]}],
        },
        "status": {"podIP": ip, "hostIP": host_ip, "phase": "Running"},
    }


def _service(name: str, selector: dict, ports: list[dict], cluster_ip: str = "10.96.0.10") -> dict:
    return {
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {"clusterIP": cluster_ip, "selector": selector, "ports": ports},
    }


def test_the_open_gpushare_extender_is_found_through_its_service_though_it_declares_no_port():
    # hostNetwork, PORT=12345, no containerPort; a NodePort Service 32766 -> 12345.
    pod = _pod("gpushare-schd-extender-x", {"app": "gpushare", "component": "ext"}, True, "10.0.0.5", "10.0.0.5", [])
    svc = _service(
        "gpushare-schd-extender", {"app": "gpushare"}, [{"port": 12345, "targetPort": 12345, "nodePort": 32766}]
    )
    found = extender.addresses([svc], [pod])
    assert [(a.host, a.port) for a in found] == [("10.96.0.10", 12345), ("10.0.0.5", 12345), ("10.0.0.5", 32766)]
    assert "service kube-system/gpushare-schd-extender" in found[0].source
    urls = [url for url, _ in extender.extender_urls(found, "/gpushare-scheduler", "bind")]
    assert "http://10.96.0.10:12345/gpushare-scheduler/bind" in urls
    assert "https://10.0.0.5:32766/gpushare-scheduler/bind" in urls and len(urls) == 6


def test_a_leader_service_reaches_only_the_labelled_pod_and_every_pod_port_is_tried():
    leader = _pod(
        "hami-scheduler-a",
        {"app.kubernetes.io/component": "hami-scheduler", "hami.io/scheduler-role": "leader"},
        False,
        "10.244.0.7",
        "10.0.0.5",
        [80],
    )
    svc = _service(
        "hami-scheduler",
        {"app.kubernetes.io/component": "hami-scheduler", "hami.io/scheduler-role": "leader"},
        [{"port": 443, "targetPort": 80, "nodePort": 31998}],
    )
    found = extender.addresses([svc], [leader])
    assert [(a.host, a.port) for a in found] == [("10.96.0.10", 443), ("10.244.0.7", 80), ("10.0.0.5", 31998)]
    assert extender.extender_urls(found[:1], "", "bind")[0][0] == "http://10.96.0.10:443/bind"
    # Not yet the leader: the Service does not select it; its own port is still tried.
    follower = {**leader, "metadata": {"name": "b", "labels": {"app.kubernetes.io/component": "hami-scheduler"}}}
    assert [(a.host, a.port) for a in extender.addresses([svc], [follower])] == [("10.244.0.7", 80)]
    # A headless Service gives no ClusterIP address; the profile's port comes first.
    headless = _service("h", {"hami.io/scheduler-role": "leader"}, [{"port": 443, "targetPort": 80}], "None")
    found = extender.addresses([headless], [leader], override=9443)
    assert [(a.host, a.port) for a in found] == [("10.244.0.7", 9443), ("10.244.0.7", 80)]


def test_the_device_plugin_container_is_the_one_mounting_the_kubelets_directory_unless_named():
    pod = {
        "spec": {
            "containers": [
                {"name": "vgpu-monitor", "volumeMounts": [{"mountPath": "/tmp"}]},
                {"name": "device-plugin", "volumeMounts": [{"mountPath": "/var/lib/kubelet/device-plugins/"}]},
                {"name": "sidecar"},
            ]
        }
    }
    assert plugin_containers(pod) == ["device-plugin", "vgpu-monitor", "sidecar"]
    assert plugin_containers(pod, preferred="sidecar") == ["sidecar", "device-plugin", "vgpu-monitor"]
    parent = {
        "spec": {"containers": [{"name": "a"}, {"name": "b", "volumeMounts": [{"mountPath": "/var/lib/kubelet"}]}]}
    }
    assert plugin_containers(parent) == ["b", "a"]


def test_an_exec_refused_at_the_handshake_quotes_the_apis_status_and_message():
    handshake = ApiException(
        status=0,
        reason=(
            "Handshake status 400 Bad Request -+-+- {'content-type': 'application/json'} -+-+- "
            'b\'{"kind":"Status","status":"Failure","message":"a container name must be specified for pod '
            'hami-device-plugin-x, choose one of: [device-plugin vgpu-monitor]","reason":"BadRequest","code":400}\''
        ),
    )
    assert api_answer(handshake) == (
        "400: a container name must be specified for pod hami-device-plugin-x, "
        "choose one of: [device-plugin vgpu-monitor]"
    )
    forbidden = ApiException(status=403, reason="Forbidden")
    forbidden.body = b'{"kind":"Status","message":"pods \\"x\\" is forbidden: User cannot create pods/exec"}'
    assert api_answer(forbidden).startswith("403: pods ")
    bare = ApiException(status=500, reason="Internal Server Error")
    assert api_answer(bare) == "500: Internal Server Error"
