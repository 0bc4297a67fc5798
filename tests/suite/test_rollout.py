"""Rollouts judged as ``kubectl rollout status`` judges them (fixtures/framework/rollout.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from gpushare_conformance.fixtures.framework import rollout
from gpushare_conformance.fixtures.framework.wait import WaitTimeout


def deployment(generation=1, observed=1, replicas=1, updated=1, total=1, available=1, deadline=False) -> dict:
    conditions = [{"type": "Progressing", "reason": "ProgressDeadlineExceeded", "message": "x"}] if deadline else []
    return {
        "metadata": {"name": "ext", "generation": generation},
        "spec": {"replicas": replicas},
        "status": {
            "observedGeneration": observed,
            "updatedReplicas": updated,
            "replicas": total,
            "availableReplicas": available,
            "conditions": conditions,
        },
    }


def daemonset(generation=1, observed=1, desired=2, updated=2, available=2, strategy="RollingUpdate") -> dict:
    return {
        "metadata": {"name": "plugin", "generation": generation},
        "spec": {"updateStrategy": {"type": strategy}},
        "status": {
            "observedGeneration": observed,
            "desiredNumberScheduled": desired,
            "updatedNumberScheduled": updated,
            "numberAvailable": available,
        },
    }


@pytest.mark.parametrize(
    "kind, obj, says",
    [
        ("deployment", deployment(), None),
        ("deployment", deployment(generation=2), "spec update to be observed"),
        ("deployment", deployment(updated=0), "0 out of 1 new replicas have been updated"),
        ("deployment", deployment(total=2), "1 old replicas are pending termination"),
        ("deployment", deployment(available=0), "0 of 1 updated replicas are available"),
        ("deployment", deployment(replicas=0, updated=0, total=0, available=0), None),
        ("daemonset", daemonset(), None),
        ("daemonset", daemonset(desired=0, updated=0, available=0), None),
        ("daemonset", daemonset(observed=0), "spec update to be observed"),
        ("daemonset", daemonset(updated=1), "1 out of 2 new pods have been updated"),
        ("daemonset", daemonset(available=1), "1 of 2 updated pods are available"),
    ],
)
def test_a_workload_waits_for_what_kubectl_rollout_status_waits_for(kind, obj, says):
    said = rollout.waits_for(kind, obj)
    assert said is None if says is None else says in said, said


def test_what_kubectl_gives_up_on_fails_at_once():
    with pytest.raises(rollout.RolloutFailed, match="deployment/ext exceeded its progress deadline"):
        rollout.waits_for("deployment", deployment(updated=0, deadline=True))
    with pytest.raises(rollout.RolloutFailed, match="only available for the RollingUpdate strategy, not OnDelete"):
        rollout.waits_for("daemonset", daemonset(strategy="OnDelete"))


class FakeApps:
    """The two lists the wait reads, each answered by the next state in turn."""

    def __init__(self, states: list[tuple[list[dict], list[dict]]]) -> None:
        self.states, self.calls = states, 0

    def _reply(self, items: list[dict]) -> SimpleNamespace:
        return SimpleNamespace(data=json.dumps({"items": items}).encode())

    def list_namespaced_deployment(self, namespace, _preload_content=True):
        return self._reply(self.states[min(self.calls, len(self.states) - 1)][0])

    def list_namespaced_daemon_set(self, namespace, _preload_content=True):
        reply = self._reply(self.states[min(self.calls, len(self.states) - 1)][1])
        self.calls += 1
        return reply


def test_the_wait_returns_every_workload_once_rolled_out():
    apps = FakeApps([([deployment(available=0)], [daemonset(updated=1)]), ([deployment()], [daemonset()])])
    names = rollout.wait_rolled_out(SimpleNamespace(apps=apps), "ns", timeout=10)
    assert names == ["deployment/ext", "daemonset/plugin"] and apps.calls == 2


def test_a_rolled_out_stack_costs_one_list_of_each_kind():
    apps = FakeApps([([deployment()], [daemonset()])])
    assert rollout.wait_rolled_out(SimpleNamespace(apps=apps), "ns", timeout=10) == [
        "deployment/ext",
        "daemonset/plugin",
    ]
    assert apps.calls == 1


def test_the_wait_names_what_is_missing_or_still_waited_for():
    empty = SimpleNamespace(apps=FakeApps([([], [])]))
    with pytest.raises(rollout.RolloutFailed, match="no Deployment or DaemonSet in namespace ns"):
        rollout.wait_rolled_out(empty, "ns", timeout=1)
    one = SimpleNamespace(apps=FakeApps([([deployment()], [])]))
    with pytest.raises(rollout.RolloutFailed, match="daemonset/plugin not found in namespace ns"):
        rollout.wait_rolled_out(one, "ns", timeout=1, names=["deployment/ext", "daemonset/plugin"])
    stuck = SimpleNamespace(apps=FakeApps([([deployment(available=0)], [daemonset()])]))
    with pytest.raises(WaitTimeout, match="0 of 1 updated replicas are available"):
        rollout.wait_rolled_out(stuck, "ns", timeout=0.5)


class NamespacedApps:
    """Deployments and DaemonSets by namespace, as the API lists them; counts the lists."""

    def __init__(self, objects: dict[str, tuple[list[str], list[str]]]) -> None:
        self.objects, self.lists = objects, 0

    def _reply(self, names: list[str]) -> SimpleNamespace:
        self.lists += 1
        return SimpleNamespace(data=json.dumps({"items": [{"metadata": {"name": n}} for n in names]}).encode())

    def list_namespaced_deployment(self, namespace, _preload_content=True):
        return self._reply(self.objects.get(namespace, ([], []))[0])

    def list_namespaced_daemon_set(self, namespace, _preload_content=True):
        return self._reply(self.objects.get(namespace, ([], []))[1])


def test_the_running_stacks_are_read_in_one_list_of_each_kind_per_namespace():
    from gpushare_conformance.fixtures.framework import stacks

    namespaces = {spec.namespace for spec in stacks.STACKS.values()}
    reference = stacks.STACKS["reference"]
    plugin = next(w.split("/", 1)[1] for w in reference.workloads if w.startswith("daemonset/"))
    # Only the reference stack's device plugin is left (its extender being replaced).
    apps = NamespacedApps({reference.namespace: ([], [plugin]), "elsewhere": (["gpushare-extender"], [])})
    assert stacks.running_stacks(SimpleNamespace(apps=apps)) == ["reference"]
    assert apps.lists == 2 * len(namespaces)
    hami = stacks.STACKS["hami-like"]
    apps = NamespacedApps({hami.namespace: ([w.split("/", 1)[1] for w in hami.workloads if "deployment/" in w], [])})
    assert stacks.running_stacks(SimpleNamespace(apps=apps)) == ["hami-like"]
    assert stacks.running_stacks(SimpleNamespace(apps=NamespacedApps({}))) == []
