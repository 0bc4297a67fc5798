"""Which requirement of the CNCF Kubernetes AI Conformance checklist each rule gives
evidence for, and the evidence summary a self-assessment links to.

The checklist (github.com/cncf/k8s-ai-conformance, ``docs/AIConformance-1.37.yaml``)
asks a platform to fill ``status``, ``evidence`` and ``notes`` per requirement id. The
suite's rules speak for three of them: sharing a card (``gpu_sharing``), access to
accelerators isolated between workloads (``secure_accelerator_access``), and the node's
inventory matching its driver (``driver_runtime_management``). The summary states what
this run showed; it is evidence for a self-assessment, not the assessment.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpushare_conformance.rules import RULES, Rule

CHECKLIST_VERSION = "v1.37"
CHECKLIST_URL = "https://github.com/cncf/k8s-ai-conformance/blob/main/docs/AIConformance-1.37.yaml"


@dataclass(frozen=True)
class Requirement:
    id: str
    section: str  # the checklist's section under spec
    level: str  # MUST or SHOULD, as the checklist says
    words: str


REQUIREMENTS: dict[str, Requirement] = {
    r.id: r
    for r in (
        Requirement("gpu_sharing", "accelerators", "SHOULD", "a well-defined GPU sharing mechanism"),
        Requirement(
            "secure_accelerator_access",
            "security",
            "MUST",
            "accelerator access isolated and mediated, no interference between workloads",
        ),
        Requirement(
            "driver_runtime_management",
            "accelerators",
            "SHOULD",
            "drivers and runtime configuration verifiably correct on accelerator nodes",
        ),
    )
}

# Rule id -> the requirements it gives evidence for. Every rule is listed
# (tests/report/test_ai_conformance.py): a new rule must say what it speaks for.
_SHARING = ("gpu_sharing",)
_BOTH = ("gpu_sharing", "secure_accelerator_access")
_SECURE = ("secure_accelerator_access",)
RULE_REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "multi_gpu_share": _SHARING,
    "card_count": _BOTH,  # the pod sees its cards and no other
    "isolation_smi": _SHARING,
    "isolation_log": _SHARING,
    "alloc_past_share_refused": _BOTH,
    "integer_share": _SHARING,
    "same_node": _SHARING,
    "distinct_cards": _SHARING,
    "share_fits_card": _SHARING,
    "node_advertises": ("gpu_sharing", "driver_runtime_management"),
    "one_budget_per_container": _BOTH,
    "memory_comes_back": _SHARING,
    "bursts_not_overbooked": _BOTH,
    "dra_consumable_capacity": _SHARING,
    "capacity_returned": _SHARING,
    "restarts_lose_nothing": _SHARING,
    "compute_shared": _SHARING,
    **{rule_id: _SECURE for rule_id in RULES if RULES[rule_id].area == "hostile"},
}


def requirements_of(rule: Rule) -> tuple[str, ...]:
    """The checklist requirements ``rule`` gives evidence for (empty if unmapped)."""
    return RULE_REQUIREMENTS.get(rule.id, ())


# How the summary's statuses read in the checklist's terms.
_JUDGED = ("FAIL", "OPEN", "PASS", "INFO")


def _status(statuses: list[str]) -> str:
    judged = [s for s in statuses if s in _JUDGED]
    if not judged:
        return ""  # nothing shown by this run: left for the assessor
    if "FAIL" in judged:
        return "Not Implemented"
    if "OPEN" in judged or len(judged) < len(statuses):
        return "Partially Implemented"
    return "Implemented"


def _by_requirement(lines: Iterable[Any]) -> dict[str, list[Any]]:
    """The summary's rule lines grouped by the requirements they give evidence for."""
    grouped: dict[str, list[Any]] = {rid: [] for rid in REQUIREMENTS}
    for line in lines:
        for rid in requirements_of(line.rule):
            grouped[rid].append(line)
    return grouped


def evidence_summary(lines: Iterable[Any], facts: dict[str, Any], report_dir: Path) -> dict[str, Any]:
    """The checklist's ``spec`` entries this run gives evidence for, from the summary's
    rule lines (``summary.RuleLine``): a status per requirement from its rules' verdicts,
    the reports as evidence, and each rule's verdict in the notes."""
    by_requirement = _by_requirement(lines)
    junit = f"file://{report_dir.resolve() / 'junit.xml'}"
    verdicts = f"file://{report_dir.resolve() / 'verdicts.json'}"
    spec: dict[str, list[dict[str, Any]]] = {}
    for rid, rule_lines in by_requirement.items():
        requirement = REQUIREMENTS[rid]
        statuses = [line.status for line in rule_lines]
        notes = "; ".join(f"{line.status} {line.rule.words}" for line in rule_lines)
        spec.setdefault(requirement.section, []).append(
            {
                "id": rid,
                "level": requirement.level,
                "status": _status(statuses),
                "evidence": [junit, verdicts],
                "notes": (
                    f"gpushare-conformance, {facts.get('stack', '?')} stack on {facts.get('cluster', '?')} cluster, "
                    f"{len(rule_lines)} rule{'' if len(rule_lines) == 1 else 's'}: {notes}"
                ),
            }
        )
    return {"metadata": {"kubernetesVersion": CHECKLIST_VERSION, "checklist": CHECKLIST_URL}, "spec": spec}


def render_evidence(summary: dict[str, Any]) -> str:
    """The summary as the checklist's YAML (its ``metadata`` and ``spec`` shape)."""
    import yaml  # here: the pytest plugin imports this module and loads no heavy library

    return yaml.safe_dump(summary, sort_keys=False, width=120)


def footer(lines: Iterable[Any]) -> str:
    """One line: per requirement, how many of its rules passed in this run."""
    parts = []
    for rid, rule_lines in _by_requirement(lines).items():
        statuses = [line.status for line in rule_lines]
        judged = [s for s in statuses if s in _JUDGED]
        if not judged:
            continue
        counts = ", ".join(f"{judged.count(s)} {s}" for s in _JUDGED if judged.count(s))
        rules = "rule" if len(statuses) == 1 else "rules"
        parts.append(f"{rid}: {_status(statuses) or 'not shown'} ({counts} of {len(statuses)} {rules})")
    return "AI conformance evidence: " + ("; ".join(parts) if parts else "none in this run")
