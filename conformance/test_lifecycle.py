"""Capacity and allocations over time: a finished Job gives its share back; restarting
the device plugin or the extender loses no allocation and double-books nothing.

Marked ``disruptive``: these restart stack components or fill whole cards.
"""

from __future__ import annotations

import time

import allure
import pytest

from fixtures import deploy

pytestmark = [pytest.mark.e2e, pytest.mark.lifecycle, pytest.mark.disruptive]


def _cards(suite) -> int:
    return suite.max_cards if suite.profile.max_cards is None else 1


def test_capacity_returns_after_the_job_completes(suite):
    cards, card_gib = _cards(suite), suite.node.card_gib
    probe = suite.profile.probe_path
    if not probe:
        pytest.skip(f"stack profile {suite.profile.name!r} mounts no probe to run a short GPU job")
    with allure.step(f"A Job takes whole cards ({card_gib} GiB on each of {cards}) and completes"):
        job = suite.submit_seed_job(total_gib=card_gib * cards, cards=cards, name="short-job",
                                    command=[probe, "--device", "0", "--alloc-mib", "1", "--hold-seconds", "2"])
        pod = suite.job_pod(job)
        suite.wait_succeeded(pod)
    with allure.step("The same whole cards can be had again by a new pod"):
        again = suite.submit_share_pod("after-job", card_gib * cards, cards)
        obj = suite.wait_running(again)
        suite.verdict("capacity_returned", "pod scheduled on the freed cards", obj["spec"].get("nodeName"),
                      bool(obj["spec"].get("nodeName")), "a pod needing every card's full share ran")


def _restart(suite, selector: str, what: str) -> None:
    namespace = suite.profile.stack_namespace
    before = {p["metadata"]["name"] for p in suite.kube.pods_by_selector(namespace, selector)}
    if not before:
        pytest.fail(f"no {what} pod ({selector}) in {namespace}")
    suite.kube.core.delete_collection_namespaced_pod(namespace, label_selector=selector)
    deadline = time.monotonic() + suite.timeout
    while time.monotonic() < deadline:
        pods = suite.kube.pods_by_selector(namespace, selector)
        fresh = [p for p in pods if p["metadata"]["name"] not in before]
        if fresh and all(any(c.get("ready") for c in (p.get("status") or {}).get("containerStatuses") or []) for p in fresh) \
                and not [p for p in pods if p["metadata"]["name"] in before]:
            break
        time.sleep(1)
    else:
        pytest.fail(f"{what} did not come back within {suite.timeout:.0f}s after its pods were deleted")
    deploy.wait_stack_ready(suite.kube, namespace, suite.profile.node_resources[0], timeout=suite.timeout,
                            progress=suite.progress)


@pytest.mark.parametrize("component", ["device plugin", "extender"])
def test_restarting_a_component_loses_no_allocation_and_double_books_nothing(suite, component):
    selector = suite.profile.device_plugin_selector if component == "device plugin" else suite.profile.extender_selector
    if not selector:
        pytest.skip(f"stack profile {suite.profile.name!r} names no {component} pods")
    cards, card_gib = _cards(suite), suite.node.card_gib
    held = 2
    with allure.step(f"A pod holds {held} GiB on each of {cards} card(s)"):
        holder = suite.submit_share_pod("holder", held * cards, cards)
        before = suite.wait_running(holder)
        cards_before = suite.allocated_cards(before)
    with allure.step(f"Restart the {component}"):
        _restart(suite, selector, component)
    with allure.step("The holder keeps running with the same cards"):
        after = suite.pod(holder)
        suite.verdict("holder_running", "Running", after["status"].get("phase"), after["status"].get("phase") == "Running")
        suite.verdict("holder_cards_kept", cards_before, suite.allocated_cards(after),
                      suite.allocated_cards(after) == cards_before)
    with allure.step("A pod asking the rest of every card plus 1 GiB stays Pending (nothing double-booked)"):
        reason = suite.rejection_reason("overbook", (card_gib - held + 1) * cards, cards)
        suite.verdict("no_double_booking", "unschedulable", reason, bool(reason), f"reason: {reason}")
    with allure.step("A pod asking exactly the rest of every card runs"):
        rest = suite.submit_share_pod("rest", (card_gib - held) * cards, cards)
        obj = suite.wait_running(rest)
        suite.verdict("rest_schedules", "Running", obj["status"].get("phase"), obj["status"].get("phase") == "Running")
    if suite.profile.inspect_path:
        with allure.step("The extender's books show the holder on the same cards after the restart"):
            data = suite.inspect()
            holder_cards = sorted(str(d.get("id")) for n in data.get("nodes", []) for d in n.get("devs", [])
                                  if any(p.get("name") == holder and p.get("namespace") == suite.namespace
                                         for p in d.get("pods", [])))
            suite.verdict("inspect_holder_cards", sorted(cards_before), holder_cards, holder_cards == sorted(cards_before))
