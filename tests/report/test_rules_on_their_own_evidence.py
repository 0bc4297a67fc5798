"""Every rule on its own evidence: a rule whose deciding check could not run is "not
judged", never PASS; a rule that does not apply is N/A; an error collecting evidence
(an exec the API refused) is not a FAIL of the rule; a run where nothing could be
judged says so."""

from __future__ import annotations

import re

from gpushare_conformance.report import CheckOutcome, VerdictFile, VerdictRecord
from gpushare_conformance.summary import (
    FAIL,
    NA,
    NOT_RUN,
    PASS,
    build_summary,
    conformance_line,
    nothing_judged,
    render_text,
)

ADVERTISES = "conformance/test_isolation.py::test_node_advertising_matches_nvml_inventory"
SICK = "conformance/test_sick_card.py::test_a_card_that_falls_off_the_bus_leaves_the_node_and_gets_no_pod"
XID = "conformance/test_sick_card.py::test_a_card_with_a_critical_xid_leaves_the_node_and_gets_no_pod"
BIND = "conformance/test_bypass.py::test_a_pod_cannot_bind_pods_through_the_extender"
RESTART = "conformance/test_lifecycle.py::test_restarting_a_component_loses_no_allocation_and_double_books_nothing"
SEED = "conformance/test_seed.py::test_seed_job_gets_4gib_on_each_of_2_cards"
FACTS = {"stack": "gpushare", "cluster": "existing"}


def _advertised(passed: bool = True) -> list[VerdictRecord]:
    return [VerdictRecord(ADVERTISES, "advertised_gpu_mem", "60", "60" if passed else "120", passed, detail="60 GiB")]


def _lines(records, outcomes) -> dict:
    return {line.rule.id: line for line in build_summary(VerdictFile(records, outcomes, FACTS))}


def test_a_rule_whose_deciding_check_could_not_run_is_not_judged_whatever_the_others_found():
    sick = VerdictRecord(
        SICK, "lost_card_not_advertised", "-", "real driver", True, kind="not_judged", detail="a real driver"
    )
    lines = _lines(
        [*_advertised(), sick], {ADVERTISES: CheckOutcome("passed"), SICK: CheckOutcome("skipped", "not judged: x")}
    )
    line = lines["node_advertises"]
    assert line.status == NOT_RUN and line.figure.startswith("not judged: "), line
    assert "test_a_card_that_falls_off_the_bus" in line.figure and "a real driver" in line.figure
    # Skipped for a plain reason, or not run at all: not judged either.
    skipped = _lines(_advertised(), {ADVERTISES: CheckOutcome("passed"), SICK: CheckOutcome("skipped", "1 card")})
    assert skipped["node_advertises"].status == NOT_RUN and "1 card" in skipped["node_advertises"].figure
    absent = _lines(_advertised(), {ADVERTISES: CheckOutcome("passed")})
    assert absent["node_advertises"].status == NOT_RUN and "did not run" in absent["node_advertises"].figure
    # Run and passed: PASS; a failure of any check still fails the rule.
    passed = CheckOutcome("passed")
    both = _lines(_advertised(), {ADVERTISES: passed, SICK: passed, XID: passed})
    assert both["node_advertises"].status == PASS
    # The lost card alone does not decide it: a card with a critical Xid must leave too.
    no_xid = _lines(_advertised(), {ADVERTISES: passed, SICK: passed})
    assert (
        no_xid["node_advertises"].status == NOT_RUN
        and "test_a_card_with_a_critical_xid" in no_xid["node_advertises"].figure
    )
    failed = _lines(_advertised(False), {ADVERTISES: CheckOutcome("failed", "x"), SICK: CheckOutcome("skipped", "y")})
    assert failed["node_advertises"].status == FAIL


def test_a_post_that_reached_nothing_is_not_judged_and_a_stack_without_extender_is_not_applicable():
    unreached = VerdictRecord(
        BIND, "victim_unbound", "-", "x", True, kind="not_judged", detail="no address of the extender answered a pod"
    )
    lines = _lines([unreached], {BIND: CheckOutcome("skipped", "not judged: no address")})
    assert lines["hostile_extender"].status == NOT_RUN
    assert lines["hostile_extender"].figure == "not judged: no address of the extender answered a pod"
    moot = VerdictRecord(BIND, "victim_unbound", "-", "x", True, kind="not_applicable", detail="no extender (DRA)")
    lines = _lines([moot], {BIND: CheckOutcome("passed")})
    assert lines["hostile_extender"].status == NA and lines["hostile_extender"].figure == "no extender (DRA)"
    # One parameter not applicable, the other judged: the judged one decides.
    moot_ext = VerdictRecord(f"{RESTART}[extender]", "holder_cards_kept", "-", "x", True, kind="not_applicable")
    kept = VerdictRecord(f"{RESTART}[device plugin]", "holder_cards_kept", "['0']", "['0']", True)
    lines = _lines(
        [moot_ext, kept],
        {f"{RESTART}[extender]": CheckOutcome("passed"), f"{RESTART}[device plugin]": CheckOutcome("passed")},
    )
    assert lines["restarts_lose_nothing"].status == PASS


def test_an_exec_the_api_refused_is_an_error_collecting_evidence_not_a_fail():
    reason = (
        "gpushare_conformance.fixtures.framework.evidence.EvidenceUnavailable: exec ['nvidia-smi'] in "
        "kube-system/hami-device-plugin-x refused by the API: 400: a container name must be specified"
    )
    lines = _lines([], {SEED: CheckOutcome("error", reason)})
    line = lines["multi_gpu_share"]
    assert line.status == NOT_RUN, line
    assert "error collecting evidence" in line.figure and "hami-device-plugin-x" in line.figure
    assert "a container name must be specified" in line.figure
    assert nothing_judged(list(lines.values()))
    assert conformance_line(list(lines.values())).startswith("conforms to the seed: not judged")


def test_not_judged_rules_are_shown_with_their_reason_and_counted_in_the_headline():
    unreached = VerdictRecord(BIND, "victim_unbound", "-", "x", True, kind="not_judged", detail="nothing answered")
    result = VerdictFile(
        [*_advertised(), unreached],
        {
            ADVERTISES: CheckOutcome("passed"),
            BIND: CheckOutcome("skipped", "not judged"),
            SICK: CheckOutcome("passed"),
            XID: CheckOutcome("passed"),
        },
        FACTS,
    )
    text = render_text(result, width=None)
    assert re.search(
        r"^----  a pod cannot bind pods through the extender +not judged: nothing answered$", text, re.M
    ), text
    assert "not judged" in text.splitlines()[0]
    lines = build_summary(result)
    assert not nothing_judged(lines)
    assert "not judged here" in conformance_line(lines)
