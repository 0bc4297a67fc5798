"""Each rule says which CNCF Kubernetes AI Conformance requirement it gives evidence
for, in the JUnit properties, the allure tags, the run's last lines and the evidence
summary ``run --ai-evidence`` writes in the checklist's shape."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpushare_conformance import ai_conformance
from gpushare_conformance.rules import RULES
from gpushare_conformance.summary import FAIL, NOT_RUN, OPEN, PASS, RuleLine


def _lines(status_of: dict[str, str], default: str = PASS) -> list[RuleLine]:
    return [RuleLine(rule, status_of.get(rule.id, default), "figure") for rule in RULES.values()]


def test_every_rule_gives_evidence_for_a_known_requirement():
    for rule in RULES.values():
        requirements = ai_conformance.requirements_of(rule)
        assert requirements, f"rule {rule.id} says no AI conformance requirement"
        assert set(requirements) <= set(ai_conformance.REQUIREMENTS), (rule.id, requirements)
    hostile = [r for r in RULES.values() if r.area == "hostile"]
    assert all("secure_accelerator_access" in ai_conformance.requirements_of(r) for r in hostile)


def test_a_failed_rule_marks_its_requirement_not_implemented_and_names_the_rule(tmp_path: Path):
    lines = _lines({"hostile_loader": FAIL})
    summary = ai_conformance.evidence_summary(lines, {"stack": "hami-like", "cluster": "local"}, tmp_path)
    text = ai_conformance.render_evidence(summary)
    loaded = yaml.safe_load(text)
    entries = {e["id"]: e for section in loaded["spec"].values() for e in section}
    assert entries["secure_accelerator_access"]["status"] == "Not Implemented"
    assert "FAIL loader tricks lift no share" in entries["secure_accelerator_access"]["notes"]
    assert entries["gpu_sharing"]["status"] == "Implemented"
    assert entries["secure_accelerator_access"]["level"] == "MUST"
    assert f"file://{tmp_path.resolve()}/junit.xml" in entries["gpu_sharing"]["evidence"]
    assert loaded["metadata"]["kubernetesVersion"] == ai_conformance.CHECKLIST_VERSION


def test_open_or_unjudged_rules_make_it_partial_and_nothing_judged_leaves_it_blank(tmp_path: Path):
    opened = _lines({"beyond_interposition": OPEN})
    entries = {
        e["id"]: e
        for section in ai_conformance.evidence_summary(opened, {}, tmp_path)["spec"].values()
        for e in section
    }
    assert entries["secure_accelerator_access"]["status"] == "Partially Implemented"
    nothing = _lines({}, default=NOT_RUN)
    entries = {
        e["id"]: e
        for section in ai_conformance.evidence_summary(nothing, {}, tmp_path)["spec"].values()
        for e in section
    }
    assert {e["status"] for e in entries.values()} == {""}


def test_the_footer_counts_each_requirements_rules():
    line = ai_conformance.footer(_lines({"hostile_loader": FAIL}))
    assert line.startswith("AI conformance evidence: gpu_sharing: Implemented (")
    assert "secure_accelerator_access: Not Implemented (1 FAIL, " in line
    assert ai_conformance.footer(_lines({}, default=NOT_RUN)) == "AI conformance evidence: none in this run"
