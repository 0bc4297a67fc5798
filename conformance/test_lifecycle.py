"""Capacity and allocations over time: a finished Job, and a pod that ends any other way
(failed, OOM-killed, evicted, deleted while Pending after binding), gives its share back; restarting
the device plugin or the extender loses no allocation and double-books nothing.

Marked ``disruptive``: these restart stack components or fill whole cards.
"""

from __future__ import annotations

import allure
import pytest

from gpushare_conformance import names
from gpushare_conformance.fixtures.framework import podstate, submit
from gpushare_conformance.fixtures.framework import verdicts as v

pytestmark = [pytest.mark.e2e, pytest.mark.lifecycle, pytest.mark.disruptive]


def test_capacity_returns_after_the_job_completes(suite):
    cards, card_gib = suite.profile.cards_for(len(suite.node.cards)), suite.node.card_gib
    with allure.step(f"A Job takes whole cards ({card_gib} GiB on each of {cards}) and completes"):
        job = suite.submit_seed_job(
            total_gib=card_gib * cards,
            cards=cards,
            name="short-job",
            command=[names.PROBE, "--device", "0", "--alloc-mib", "1"],
        )
        pod = suite.job_pod(job)
        suite.wait_succeeded(pod)
    with allure.step("The same whole cards can be had again by a new pod"):
        again = suite.submit_share_pod("after-job", card_gib * cards, cards)
        obj = suite.wait_running(again)
        suite.expect(
            v.equal(
                "capacity_returned",
                "Running",
                obj["status"].get("phase"),
                f"a pod needing every card's full share, on {obj['spec'].get('nodeName')}",
            )
        )


@pytest.mark.parametrize("component", ["device plugin", "extender"])
def test_restarting_a_component_loses_no_allocation_and_double_books_nothing(suite, component):
    selector = suite.profile.device_plugin_selector if component == "device plugin" else suite.profile.extender_selector
    if not selector:
        placement = " (kube-scheduler itself places its claims)" if suite.profile.dra is not None else ""
        suite.not_applicable("holder_cards_kept", f"stack {suite.profile.name} has no {component}{placement}")
        return
    cards, card_gib = suite.profile.cards_for(len(suite.node.cards)), suite.node.card_gib
    held = 2
    with allure.step(f"A pod holds {held} GiB on each of {cards} card(s)"):
        holder = suite.submit_share_pod("holder", held * cards, cards)
        before = suite.wait_running(holder)
        cards_before = suite.allocated_cards(before)
    # The pods below must meet the holder on its cards, whichever the stack chose:
    # every other card of the node is filled first.
    with allure.step(f"Fill the node's cards other than the holder's ({', '.join(cards_before)})"):
        suite.fill_cards_except(suite.node_of(before), cards_before)
    taken = len(cards_before)
    with allure.step(f"Restart the {component}"):
        suite.restart(selector)
    with allure.step("The holder keeps running with the same cards"):
        after = suite.pod(holder)
        suite.expect(v.equal("holder_running", "Running", after["status"].get("phase")))
        suite.expect(v.equal("holder_cards_kept", cards_before, suite.allocated_cards(after)))
    count = taken if taken > 1 else None
    with allure.step("A pod asking the rest of the holder's cards plus 1 GiB stays Pending (nothing double-booked)"):
        reason = suite.rejection_reason(
            "overbook",
            (card_gib - held + 1) * taken,
            count,
            node=before["spec"]["nodeName"],
            verdict="no_double_booking",
        )
        suite.expect(v.matches("no_double_booking", r"\S", reason, "scheduling reason"))
    with allure.step("A pod asking exactly the rest of the holder's cards runs"):
        rest = suite.submit_share_pod_on(before["spec"]["nodeName"], "rest", (card_gib - held) * taken, count)
        obj = suite.wait_running(rest)
        suite.expect(v.equal("rest_schedules", "Running", obj["status"].get("phase")))
    if suite.profile.inspect_path:
        with allure.step("The extender's books show the holder on the same cards after the restart"):
            data = suite.inspect()
            holder_cards = sorted(
                str(d.get("id"))
                for n in data.get("nodes", [])
                for d in n.get("devs", [])
                if any(p.get("name") == holder and p.get("namespace") == suite.namespace for p in d.get("pods", []))
            )
            suite.expect(v.equal("inspect_holder_cards", sorted(cards_before), holder_cards))


# How a pod that holds whole cards can end, other than a Job that succeeds: each must
# give the cards back. (pod name, what ends it)
ENDINGS = {
    "failed": "its container exits 3 (restartPolicy Never: the pod is Failed)",
    "oom-killed": "its container passes a 32 MiB memory limit and is OOM-killed (Failed)",
    "evicted": "it is evicted through the Eviction API while it runs",
    "deleted-pending": "it is deleted while Pending after binding (its image can never be pulled)",
}
# A python3 line that takes 512 MiB of host memory, touched, past the 32 MiB limit.
TAKE_MEMORY = "b = bytearray(512 << 20); import time; time.sleep(30)"


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_capacity_returns_after_a_pod_ends_any_way(suite, ending):
    """A pod holding whole cards that fails, is OOM-killed, is evicted, or is deleted
    while Pending after binding gives its cards back: a new pod needing every card's
    full share runs."""
    cards, card_gib = suite.profile.cards_for(len(suite.node.cards)), suite.node.card_gib
    command = {"failed": ["sh", "-c", "exit 3"], "oom-killed": ["python3", "-c", TAKE_MEMORY]}.get(ending, submit.HOLD)
    with allure.step(f"A pod takes whole cards ({card_gib} GiB on each of {cards}), then {ENDINGS[ending]}"):
        pod = suite.pin(
            submit.share_pod(suite.profile, ending, suite.suite_image, card_gib * cards, cards, list(command))
        )
        container = pod["spec"]["containers"][0]
        if ending == "oom-killed":
            container.setdefault("resources", {}).setdefault("limits", {})["memory"] = "32Mi"
        if ending == "deleted-pending":
            container["image"] = "localhost/gpushare-conformance/never-pulled:absent"
            container["imagePullPolicy"] = "Never"
        submit.create(suite.kube, suite.namespace, pod)
        if ending in ("failed", "oom-killed"):
            state, obj = suite.wait_state(ending, podstate.FAILED)
            obj = suite.wait_phase(ending, "Failed")  # over for the cluster, not only its container
            how = f"Failed ({state.reason})"
        elif ending == "deleted-pending":
            state, obj = suite.wait_state(ending, podstate.STUCK)
            how = f"bound to {obj['spec'].get('nodeName')}, {state.reason}; deleted"
            suite.delete_pod(ending)
        else:
            suite.wait_running(ending)
            suite.kube.core.create_namespaced_pod_eviction(
                ending,
                suite.namespace,
                {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": ending, "namespace": suite.namespace},
                },
            )
            how = "evicted while running"
            suite.delete_pod(ending)  # waits until it is gone (already on its way)
    with allure.step("The same whole cards can be had again by a new pod"):
        again = suite.submit_share_pod(f"after-{ending}", card_gib * cards, cards)
        try:
            obj = suite.wait_running(again)
            phase, where = obj["status"].get("phase"), obj["spec"].get("nodeName")
        except Exception as exc:  # its state is the figure
            phase, where = podstate.pod_state(suite.pod(again)).kind, f"nowhere ({str(exc)[:300]})"
        suite.expect(
            v.equal(
                "capacity_returned",
                "Running",
                phase,
                f"after a pod holding {cards} whole card(s) was {how}: a pod needing every card's full share, "
                f"on {where}",
            )
        )
