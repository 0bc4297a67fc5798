"""The framework reads pods, nodes and events as the API serves them (framework/kube.py):
the JSON the server sent, asked for without the client's models."""

from __future__ import annotations

import json
from types import SimpleNamespace

from gpushare_conformance.fixtures.framework.kube import Kube

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "creationTimestamp": "2026-12-07T15:00:00Z"},
    # A field a client model may not know yet is kept.
    "status": {"phase": "Running", "aFieldTheClientLacks": {"x": 1}},
}


class _Core:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []

    def _answer(self, name: str, body: dict, args: tuple, kwargs: dict) -> SimpleNamespace:
        self.calls.append((name, args, kwargs))
        assert kwargs.get("_preload_content") is False, f"{name} was asked to build client models: {kwargs}"
        return SimpleNamespace(data=json.dumps(body).encode())

    def read_namespaced_pod(self, *args, **kwargs):
        return self._answer("read_namespaced_pod", POD, args, kwargs)

    def list_namespaced_pod(self, *args, **kwargs):
        return self._answer("list_namespaced_pod", {"items": [POD]}, args, kwargs)

    def list_node(self, *args, **kwargs):
        return self._answer("list_node", {"items": []}, args, kwargs)

    def read_node(self, *args, **kwargs):
        return self._answer("read_node", {"metadata": {"name": args[0]}}, args, kwargs)

    def list_namespaced_event(self, *args, **kwargs):
        return self._answer("list_namespaced_event", {"items": None}, args, kwargs)


def _kube() -> Kube:
    kube = Kube.__new__(Kube)  # no kubeconfig: only the API objects are replaced
    kube.core = _Core()
    return kube


def test_a_pod_is_the_json_the_server_sent_every_field_kept():
    kube = _kube()
    assert kube.pod("ns", "p") == POD
    assert kube.core.calls[0][:2] == ("read_namespaced_pod", ("p", "ns"))


def test_lists_and_nodes_are_read_raw_and_an_empty_list_is_empty():
    kube = _kube()
    assert kube.pods_by_selector("ns", "app=x") == [POD]
    assert kube.core.calls[-1][2]["label_selector"] == "app=x"
    assert kube.nodes() == []
    assert kube.node("n1") == {"metadata": {"name": "n1"}}
    assert kube.events_for("ns", "p") == []
    assert kube.core.calls[-1][2]["field_selector"] == "involvedObject.name=p"
