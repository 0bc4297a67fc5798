"""A failed check's diagnostics: what the pod and node collectors gather, and at what
cost (one kubectl per collector, however many pods the check left)."""

from __future__ import annotations

from types import SimpleNamespace

import yaml

from gpushare_conformance.fixtures.framework import diagnostics as d
from gpushare_conformance.fixtures.framework.diagnostics import Scene, Window


class RecordingKube:
    """The calls the collectors make, answered from a fixed namespace of pods."""

    def __init__(self, pods: list[dict]) -> None:
        self.pods = pods
        self.kubectl_calls: list[tuple[str, ...]] = []
        self.core = SimpleNamespace(list_namespaced_pod=lambda ns: {"items": self.pods})

    def to_dict(self, obj):
        return obj

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        self.kubectl_calls.append(args)
        return f"described {' '.join(args)}"

    def nodes(self):
        return [{"metadata": {"name": "n0"}}]

    def pod_log(self, namespace, name, container=None, **_):
        return f"log of {namespace}/{name}/{container}"


def _pod(name: str, node: str | None) -> dict:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {**({"nodeName": node} if node else {}), "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }


def _scene(kube: RecordingKube) -> Scene:
    return Scene(kube=kube, namespace="ns", profile=None, window=Window(0, 1), details={})


def test_pods_are_described_in_one_call_with_each_pods_object_and_logs(monkeypatch):
    monkeypatch.setattr(d, "pod_logs", lambda kube, ns, name, container: f"log {name}/{container}")
    kube = RecordingKube([_pod(f"burst-{i}", "n1") for i in range(12)])
    out = d._pods(_scene(kube))
    assert kube.kubectl_calls == [("describe", "pods", "-n", "ns")]
    assert out["pods.describe.txt"] == "described describe pods -n ns"
    assert yaml.safe_load(out["burst-7.yaml"])["metadata"]["name"] == "burst-7"
    assert out["burst-11.c.log"] == "log burst-11/c"


def test_an_empty_namespace_is_not_described():
    kube = RecordingKube([])
    assert d._pods(_scene(kube)) == {} and kube.kubectl_calls == []


def test_the_nodes_of_the_checks_pods_are_described_in_one_call():
    kube = RecordingKube([_pod("a", "n2"), _pod("b", "n1"), _pod("c", "n2"), _pod("pending", None)])
    out = d._nodes(_scene(kube))
    assert kube.kubectl_calls == [("describe", "nodes", "n1", "n2")]
    assert out == {"nodes.describe.txt": "described describe nodes n1 n2"}


def test_a_check_with_no_placed_pod_gets_every_node():
    kube = RecordingKube([_pod("pending", None)])
    d._nodes(_scene(kube))
    assert kube.kubectl_calls == [("describe", "nodes", "n0")]
