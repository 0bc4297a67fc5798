"""The namespaces of a run's checks, handled without pytest against a small fake of the
``Kube`` wrapper (``core``, ``batch``, ``resource``): named as DNS labels, labelled with
the run, deleted pods first, swept at the end with what is left reported."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

from kubernetes.client.exceptions import ApiException

from gpushare_conformance import names
from gpushare_conformance.fixtures.framework import namespaces
from gpushare_conformance.fixtures.framework.timeouts import Timeouts

QUICK = Timeouts(pods_gone=0.3, claim_release=0.3, namespace_delete=0.3)


def _ns(name: str, phase: str = "Active"):
    return SimpleNamespace(metadata=SimpleNamespace(name=name), status=SimpleNamespace(phase=phase))


class _Core:
    """The part of the core API the namespace helpers use, over an in-memory cluster."""

    def __init__(self, pods: dict[str, list[str]], spaces: dict[str, str] | None = None, stuck: bool = False) -> None:
        self.pods, self.spaces, self.stuck = pods, spaces or {}, stuck
        self.created: list[dict] = []
        self.deleted: list[str] = []
        self.account_after: int | None = 0
        self.account_looks = 0

    def create_namespace(self, body: dict) -> None:
        self.created.append(body)

    def read_namespaced_service_account(self, name: str, namespace: str) -> None:
        """The controller manager makes ``default`` after ``account_after`` looks (never: None)."""
        self.account_looks += 1
        if self.account_after is None or self.account_looks <= self.account_after:
            raise ApiException(status=404, reason="Not Found")

    def delete_collection_namespaced_pod(self, namespace: str, grace_period_seconds: int) -> None:
        if not self.stuck:
            self.pods[namespace] = []

    def list_namespaced_pod(self, namespace: str):
        return SimpleNamespace(
            items=[SimpleNamespace(metadata=SimpleNamespace(name=p)) for p in self.pods.get(namespace, [])]
        )

    def delete_namespace(self, name: str) -> None:
        self.deleted.append(name)
        if not self.stuck:
            self.spaces.pop(name, None)

    def list_namespace(self, label_selector: str):
        return SimpleNamespace(items=[_ns(n, p) for n, p in self.spaces.items()])


class _Resource:
    def __init__(self, claims: list[dict]) -> None:
        self.claims = claims

    def list_namespaced_resource_claim(self, namespace: str, _preload_content: bool):
        return SimpleNamespace(data=json.dumps({"items": self.claims}))


def _kube(core: _Core, claims: list[dict] | None = None):
    batch = SimpleNamespace(delete_collection_namespaced_job=lambda namespace, propagation_policy: None)
    return SimpleNamespace(core=core, batch=batch, resource=_Resource(claims or []))


def test_a_namespace_name_is_a_dns_label_from_the_test_name_and_the_count():
    name = namespaces.namespace_name("conformance/test_grid.py::test_Grid_[2 GiB over 4 cards]", 7)
    assert re.fullmatch(r"gs-test-grid-2-gib-over-4-cards-7-[0-9a-f]{4}", name), name
    long = namespaces.namespace_name("x.py::test_" + "a" * 100, 1)
    assert len(long) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", long)
    assert namespaces.namespace_name("x.py::t", 1) != namespaces.namespace_name("x.py::t", 1), "random suffix"


def test_a_namespace_is_created_with_the_run_and_suite_labels():
    core = _Core({})
    assert namespaces.create_namespace(_kube(core), "gs-a-1-beef", "run-1") == "gs-a-1-beef"
    (body,) = core.created
    assert body["metadata"] == {"name": "gs-a-1-beef", "labels": {names.RUN_LABEL: "run-1", names.SUITE_LABEL: "true"}}


def test_a_new_namespace_is_handed_over_once_its_default_service_account_exists():
    core = _Core({})
    core.account_after = 3  # the API would refuse pods until then
    assert namespaces.create_namespace(_kube(core), "gs-a-1-beef", "run-1") == "gs-a-1-beef"
    assert core.account_looks == 4


def test_a_namespace_whose_service_account_never_comes_is_handed_over_with_a_warning():
    core, said = _Core({}), []
    core.account_after = None
    quick = Timeouts(namespace_ready=0.3)
    assert namespaces.create_namespace(_kube(core), "gs-a-1-beef", "run-1", quick, said.append) == "gs-a-1-beef"
    assert core.account_looks >= 2
    assert len(said) == 1 and "default ServiceAccount of namespace gs-a-1-beef" in said[0], said
    assert "pods there may be refused" in said[0]


def test_a_namespace_is_deleted_after_its_pods_are_gone():
    core = _Core({"gs-a": ["p1", "p2"]})
    namespaces.delete_namespace(_kube(core), "gs-a", QUICK, print)
    assert core.pods["gs-a"] == [] and core.deleted == ["gs-a"]


def test_pods_that_stay_are_reported_and_the_namespace_deleted_anyway():
    core, said = _Core({"gs-a": ["stuck"]}, stuck=True), []
    namespaces.delete_namespace(_kube(core), "gs-a", QUICK, said.append)
    assert core.deleted == ["gs-a"]
    assert len(said) == 1 and "the pods of namespace gs-a to be deleted" in said[0] and "anyway" in said[0]


def test_an_allocated_claim_holds_the_namespace_until_the_time_out():
    core, said = _Core({"gs-a": []}), []
    claim = {"metadata": {"name": "c1"}, "status": {"allocation": {"devices": {}}}}
    namespaces.delete_namespace(_kube(core, [claim]), "gs-a", QUICK, said.append)
    assert "the DRA claims of namespace gs-a to be released" in said[0] and "1 allocated: c1" in said[0]
    assert core.deleted == ["gs-a"]


def test_the_sweep_deletes_the_runs_namespaces_and_waits_for_them():
    core = _Core({}, {"gs-a": "Active", "gs-b": "Terminating"})
    core.delete_namespace = lambda name: (core.deleted.append(name), core.spaces.clear())
    assert namespaces.sweep_namespaces(_kube(core), "run-1", QUICK, print) == []
    assert core.deleted == ["gs-a"], "a Terminating namespace is not deleted again"


def test_the_sweep_leaves_an_empty_terminating_namespace_to_kubernetes():
    # The namespace controller removes a deleted namespace no sooner than 5 s later; an
    # empty one holds nothing the next run needs.
    core, said = _Core({"gs-a": []}, {"gs-a": "Terminating", "gs-b": "Active"}), []
    core.delete_namespace = lambda name: (core.deleted.append(name), core.spaces.__setitem__(name, "Terminating"))
    assert namespaces.sweep_namespaces(_kube(core), "run-1", QUICK, said.append) == []
    assert core.deleted == ["gs-b"] and core.spaces == {"gs-a": "Terminating", "gs-b": "Terminating"}
    assert not said


def test_the_sweep_waits_for_pods_and_claims_of_a_terminating_namespace_and_reports_them():
    core, said = _Core({"gs-a": ["stuck"]}, {"gs-a": "Terminating"}), []
    assert namespaces.sweep_namespaces(_kube(core), "run-1", QUICK, said.append) == ["gs-a"]
    assert any("namespaces not deleted" in line and "gs-a (pods stuck)" in line for line in said), said
    claim = {"metadata": {"name": "c1"}, "status": {"allocation": {"devices": {}}}}
    core, said = _Core({"gs-a": []}, {"gs-a": "Terminating"}), []
    assert namespaces.sweep_namespaces(_kube(core, [claim]), "run-1", QUICK, said.append) == ["gs-a"]
    assert any("gs-a (allocated claims c1)" in line for line in said), said


def test_the_sweep_returns_and_reports_the_namespaces_left():
    core, said = _Core({}, {"gs-a": "Active"}, stuck=True), []
    assert namespaces.sweep_namespaces(_kube(core), "run-1", QUICK, said.append) == ["gs-a"]
    assert any("namespaces not deleted" in line for line in said)


def test_a_sweep_that_cannot_reach_the_cluster_reports_and_returns_nothing():
    core, said = _Core({}), []
    core.list_namespace = lambda label_selector: (_ for _ in ()).throw(ConnectionRefusedError("refused"))
    assert namespaces.sweep_namespaces(_kube(core), "run-1", QUICK, said.append) == []
    assert said == ["warning: namespace clean-up failed: ConnectionRefusedError: refused"]
