"""All M cards on one node, on a cluster with two or more GPU nodes.

A pod asking M cards that no single node has free, while the nodes together do, stays
Pending with a reason naming the rule and is never split across nodes; a pod that
fits on another node goes there when the first is full. Skipped only where the
cluster has a single GPU node.

Marked ``disruptive``: the checks fill every GPU node.
"""

from __future__ import annotations

import allure
import pytest

from gpushare_conformance.fixtures.framework import verdicts as v

pytestmark = [pytest.mark.e2e, pytest.mark.restrictions, pytest.mark.disruptive]

# What a reason must mention to name the rule "all M cards on one node" (any stack's wording).
# HAMi's scheduler says NodeInsufficientDevice / CardInsufficientMemory.
ONE_NODE = r"gpu-count|(card|gpu)s? (count|number)|not enough (card|gpu)s|needs \d+|Insufficient(Device|Memory)"
CARDS = 2


def _gpu_nodes(suite):
    if len(suite.gpus) < 2:
        pytest.skip(f"needs two or more GPU nodes; the cluster has one ({suite.gpus[0].node})")
    uneven = [n.node for n in suite.gpus if len({c.memory_gib for c in n.cards}) != 1]
    if uneven:
        pytest.skip(f"needs nodes whose cards are one size, to fill them exactly; {uneven} mix sizes")
    return suite.gpus


def _fill(suite, node) -> list[str]:
    """Hold every card of ``node``, whole; return the cards held."""
    name = suite.unique(f"fill-{node.node}")
    suite.submit_share_pod_on(node.node, name, len(node.cards) * node.card_gib, len(node.cards))
    return suite.allocated_cards(suite.wait_running(name))


def test_m_cards_free_only_across_nodes_stay_pending_never_split(suite):
    nodes = _gpu_nodes(suite)
    share = min(n.card_gib for n in nodes)
    total = share * CARDS
    # Each node keeps one whole card free and holds just enough of its others that they
    # have less than the share left. A node then has the GiB in total (the scheduler's
    # own count of aliyun.com/gpu-mem lets the pod through) but one card with the share
    # free, while the nodes together have one such card each: only the card rule,
    # judged per node, can turn the pod away.
    held = {n.node: n.card_gib - share + 1 for n in nodes}
    free_gib = {n.node: n.card_gib + (len(n.cards) - 1) * (share - 1) for n in nodes}
    admitted = [n for n, gib in free_gib.items() if gib >= total]
    if not admitted:
        pytest.skip(f"no GPU node keeps {total} GiB free with one card whole; free GiB would be {free_gib}")
    with allure.step(
        "On each GPU node, hold all cards but one so they keep less than the share: "
        + ", ".join(f"{n.node}: {held[n.node]} GiB on {len(n.cards) - 1} card(s)" for n in nodes)
    ):
        for node in (n for n in nodes if len(n.cards) > 1):
            name = suite.unique(f"hold-{node.node}")
            suite.submit_share_pod_on(node.node, name, held[node.node] * (len(node.cards) - 1), len(node.cards) - 1)
            suite.wait_running(name)
    with allure.step(
        f"A pod asking {share} GiB on each of {CARDS} cards: {', '.join(admitted)} has {total} GiB free in all but "
        f"one card with {share} GiB; the {len(nodes)} nodes together have {len(nodes)} such cards"
    ):
        suite.submit_share_pod("across-nodes", total, CARDS)
        reason = suite.wait_unschedulable("across-nodes", "reason_names_rule[all M cards on one node]")
        suite.expect(v.matches("reason_names_rule[all M cards on one node]", ONE_NODE, reason, "scheduling reason"))
    with allure.step("The pod is not split: no node and no cards written for it"):
        obj = suite.pod("across-nodes")
        annotations = (obj["metadata"].get("annotations") or {}).keys()
        written = sorted(set(annotations) & set(suite.profile.allocation_annotations))
        suite.expect(v.none_of("not_split", written, "allocation annotations on the pending pod"))
        suite.expect(v.equal("not_bound", None, obj["spec"].get("nodeName"), "the pending pod's node"))


def test_a_pod_that_fits_on_a_second_node_goes_there_when_the_first_is_full(suite):
    nodes = _gpu_nodes(suite)
    full, others = nodes[0], nodes[1:]
    cards = min(CARDS, *(len(n.cards) for n in others))
    with allure.step(f"Fill every card of {full.node}"):
        _fill(suite, full)
    with allure.step(f"A pod asking 1 GiB on each of {cards} card(s) runs on another node, all its cards there"):
        suite.submit_share_pod("second-node", cards, cards)
        obj = suite.wait_running("second-node")
        node = obj["spec"].get("nodeName")
        suite.expect(
            v.subset("on_a_node_with_room", [node], [n.node for n in others], f"the pod's node ({full.node} full)")
        )
        allocated = suite.allocated_cards(obj)
        suite.expect(v.distinct("cards_distinct", allocated, cards, "allocated cards"))
        known = suite.card_ids(suite.node_of(obj))
        suite.expect(v.subset("cards_on_its_node", allocated, known, f"cards of node {node}"))
