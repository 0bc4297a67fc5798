"""The peer-like overlays (manifests/overlays/peers/*) and the hami-like scheduler
configuration render and match what the suite's profiles and the switcher expect."""

from __future__ import annotations

import yaml
from test_manifests import MANIFESTS, by_kind, render

from gpushare_conformance.fixtures.framework import stacks
from gpushare_conformance.profiles import PROFILES

REFERENCE_ACCOUNTS = {"gpushare-extender", "gpushare-device-plugin"}


def _selector_matches(selector: str, labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in (part.split("=", 1) for part in selector.split(",")))


def _workload(docs: list[dict], selector: str) -> dict:
    (doc,) = [
        d
        for d in docs
        if d["kind"] in ("Deployment", "DaemonSet")
        and _selector_matches(selector, d["spec"]["template"]["metadata"]["labels"])
    ]
    return doc


def test_gpushare_like_overlay_matches_the_gpushare_profile():
    docs = render("overlays/peers/gpushare-like")
    profile = PROFILES["gpushare"]
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] not in ("ClusterRole", "ClusterRoleBinding")} == {
        profile.stack_namespace
    }
    extender = _workload(docs, profile.extender_selector)
    plugin = _workload(docs, profile.device_plugin_selector)
    assert _selector_matches(
        "app=gpushare,component=gpushare-device-plugin", plugin["spec"]["template"]["metadata"]["labels"]
    )
    ext = extender["spec"]["template"]["spec"]
    assert ext["hostNetwork"] is True
    assert ext["containers"][0]["args"][:3] == [
        "--flavor=gpushare-like",
        "--port=12345",
        "--prefix=/gpushare-scheduler",
    ]
    # As the open stack: no container port declared; its NodePort Service tells the port.
    assert not any(c.get("ports") for c in ext["containers"])
    service = by_kind(docs, "Service", "gpushare-schd-extender")["spec"]
    assert service["type"] == "NodePort" and service["ports"][0]["targetPort"] == 12345
    assert service["ports"][0]["nodePort"] == 32766
    assert _selector_matches(profile.extender_selector, service["selector"])
    assert profile.extender_port is None and profile.inspect_path == "/gpushare-scheduler/inspect"
    dp = plugin["spec"]["template"]["spec"]
    assert dp["nodeSelector"] == {"gpushare": "true"}
    assert "--flavor=gpushare-like" in dp["containers"][0]["args"]
    assert "initContainers" not in dp  # nothing to mount: no isolation
    accounts = {d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"}
    assert accounts == {"gpushare-schd-extender", "gpushare-device-plugin"}
    rules = by_kind(docs, "ClusterRole", "gpushare-device-plugin")["rules"]
    assert any("nodes/status" in r["resources"] for r in rules)  # it patches capacity aliyun.com/gpu-count
    assert {c["image"] for w in (extender, plugin) for c in w["spec"]["template"]["spec"]["containers"]} == {
        "localhost/gpushare-conformance/stack:dev"
    }


def test_hami_like_overlay_matches_the_hami_profile():
    docs = render("overlays/peers/hami-like")
    profile = PROFILES["hami"]
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] not in ("ClusterRole", "ClusterRoleBinding")} == {
        profile.stack_namespace
    }
    extender = _workload(docs, profile.extender_selector)
    plugin = _workload(docs, profile.device_plugin_selector)
    ext = extender["spec"]["template"]["spec"]
    assert "--flavor=hami-like" in ext["containers"][0]["args"]
    assert not ext.get("hostNetwork") and ext["containers"][0]["name"] == "vgpu-scheduler-extender"
    # The Service selects the leader only: the pod labels itself once it serves.
    service = by_kind(docs, "Service", "hami-scheduler")["spec"]
    assert service["selector"]["hami.io/scheduler-role"] == "leader"
    assert service["ports"][0]["nodePort"] == 31998
    assert profile.extender_prefix == "" and profile.extender_port is None
    dp = plugin["spec"]["template"]["spec"]
    # As HAMi's chart: the device plugin first, its vGPU monitor beside it.
    assert [c["name"] for c in dp["containers"]] == ["device-plugin", "vgpu-monitor"]
    assert dp["nodeSelector"] == {"gpu": "on"}
    assert "--flavor=hami-like" in dp["containers"][0]["args"]
    assert dp["initContainers"][0]["name"] == "install-native"  # publishes libgpushare-shim-hamilike.so
    accounts = {d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"}
    assert accounts == {"hami-scheduler", "hami-device-plugin"} and not accounts & REFERENCE_ACCOUNTS


def test_hami_like_scheduler_config_manages_hamis_resources():
    text = (MANIFESTS / "scheduler" / "scheduler-config-hami-like.yaml").read_text()
    assert "__KUBECONFIG__" in text
    config = yaml.safe_load(text)
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == "http://127.0.0.1:31998"
    assert (extender["filterVerb"], extender["bindVerb"]) == ("filter", "bind")
    assert extender["managedResources"] == [
        {"name": "nvidia.com/gpu", "ignoredByScheduler": True},
        {"name": "nvidia.com/gpumem", "ignoredByScheduler": True},
    ]


def test_the_switcher_knows_each_overlay_and_its_workloads():
    for spec in stacks.STACKS.values():
        docs = render(str(spec.overlay.relative_to(MANIFESTS)))
        names = {f"{d['kind'].lower()}/{d['metadata']['name']}" for d in docs}
        assert set(spec.workloads) <= names, spec.name
        for selector in spec.selectors:
            _workload(docs, selector)
        assert spec.scheduler_config.is_file()
    assert stacks.STACKS["reference"].overlay == MANIFESTS / "overlays" / "mock"
    assert stacks.STACKS["reference"].scheduler_config == MANIFESTS / "scheduler" / "scheduler-config.yaml"
