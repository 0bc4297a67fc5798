"""The seed's rules and the checks that verify them: one registry for the reports.

``RULES`` lists what the seed promises (one line each in the verdict summary) and
``CHECKS`` says, per check function in ``conformance/``, how the reports show it: a
human title, its area (allure feature), the rules it verifies (allure stories), its
severity, and which of its verdicts speak for which rule. A check without an entry
here fails ``tests/report/test_rules.py``. Nothing here imports pytest or allure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The seed: Alibaba Cloud ACK, "Enable multi-GPU sharing with shared GPU scheduling"
# (shared/seed/000_7bdc776826bb7f12.txt is the Portuguese copy the project started from).
SEED_URL = (
    "https://www.alibabacloud.com/help/en/ack/ack-managed-and-ack-dedicated/user-guide/"
    "multi-card-sharing-through-shared-gpu-scheduling"
)

# Areas, in report order: the allure feature of every check in that area.
AREAS: dict[str, str] = {
    "seed": "Seed scenario",
    "grid": "Allocation grid",
    "restrictions": "Restrictions",
    "isolation": "Isolation",
    "lifecycle": "Lifecycle",
    "limitation": "Limitation",
    # One rule per attack class of a hostile workload (docs/threat-model.md), shown
    # apart from the seed's rules for cooperative workloads.
    "hostile": "Hostile workload",
}
SEVERITIES = ("blocker", "critical", "normal", "minor", "trivial")


class RegistryError(ValueError):
    """A registry entry that names an unknown rule, area or severity."""


@dataclass(frozen=True)
class Rule:
    """One promise of the seed, as the summary shows it."""

    id: str
    words: str  # the summary line's text
    section: str  # the seed's section that states it
    anchor: str  # text the seed's page shows there (a text fragment of SEED_URL)
    area: str
    severity: str
    # The verdicts (``Verdict.check``, before any ``[...]``) that carry this rule's figure.
    verdicts: tuple[str, ...] = ()
    kind: str = "verdict"  # "info": a limitation reported, not judged
    # Checks (function names of ``CHECKS``) without which the rule is not shown to hold:
    # when one of them could not run (skipped, not judged), the rule is "not judged",
    # whatever the others found; a failure anywhere still fails it.
    deciding: tuple[str, ...] = ()

    @property
    def link(self) -> str:
        return f"{SEED_URL}#:~:text={self.anchor.replace(' ', '%20').replace('/', '%2F')}"


@dataclass(frozen=True)
class Check:
    """How the reports show one check function of ``conformance/``."""

    title: str  # str.format template over the check's parameters (None shows as "none")
    area: str
    rules: tuple[str, ...]
    severity: str = "normal"
    extra: Mapping[str, str] = field(default_factory=dict)  # more allure labels, e.g. {"epic": ...}

    def title_for(self, params: Mapping[str, Any] | None = None) -> str:
        shown = {k: ("none" if v is None else v) for k, v in (params or {}).items()}
        try:
            return self.title.format(**shown)
        except (KeyError, IndexError, ValueError):
            return self.title


_RULES = (
    Rule(
        "multi_gpu_share",
        "multi-GPU share: N/M GiB on each of M cards",
        "How it works: allocation formula",
        "Allocation formula",
        "seed",
        "blocker",
        ("card_total", "allocated_cards"),
    ),
    Rule(
        "card_count",
        "the pod sees exactly M cards",
        "Verification 1 (terminal)",
        "nvidia-smi",
        "seed",
        "critical",
        ("card_count", "nvidia_smi_cards", "visible_devices"),
    ),
    Rule(
        "isolation_smi",
        "nvidia-smi shows N/M GiB, not the card",
        "Verification 1 (terminal)",
        "nvidia-smi",
        "isolation",
        "blocker",
        ("card_total",),
    ),
    Rule(
        "isolation_log",
        "framework log shows N/M GiB per card",
        "Verification 2 (logs)",
        "totalMemory",
        "isolation",
        "critical",
        ("total_memory_lines",),
    ),
    Rule(
        "alloc_past_share_refused",
        "the share allocatable, not a byte more",
        "Limitations: memory isolation",
        "GPU memory isolation",
        "isolation",
        "critical",
        (
            "alloc_past_share_oom",
            "alloc_within_share",
            "alloc_all_told_free",
            "narrowed_rank_gets_its_card",
            "narrowed_rank_charged_on_its_card",
            "narrowed_rank_left_card_0",
            "narrowed_rank_past_share",
            "share_usable",
            "past_share_below_physical",
            "no_overbooking",
            "same_cards",
            "mapped_memory_held",
            "mapped_memory_freed_at_unmap",
        ),
    ),
    Rule(
        "integer_share",
        "N/M must be an integer",
        "Constraints",
        "N/M must be an integer",
        "restrictions",
        "critical",
        ("reason_names_rule", "positive_control", "per_card_share", "card_count", "fraction_refused_or_given"),
    ),
    Rule(
        "same_node",
        "all M cards on the same node",
        "Constraints",
        "must be on the same Kubernetes node",
        "restrictions",
        "critical",
        (
            "cards_on_node",
            "reason_names_rule",
            "positive_control",
            "not_split",
            "not_bound",
            "on_a_node_with_room",
            "cards_on_its_node",
        ),
    ),
    Rule(
        "distinct_cards",
        "the M cards are distinct",
        "How it works: multi-GPU sharing",
        "Multi-GPU sharing",
        "restrictions",
        "critical",
        ("cards_distinct", "allocated_cards"),
    ),
    Rule(
        "share_fits_card",
        "N/M above a card is not scheduled",
        "How it works: allocation formula",
        "Allocation formula",
        "restrictions",
        "normal",
        ("reason_names_rule", "positive_control"),
    ),
    Rule(
        "node_advertises",
        "node advertises what NVML reports",
        "Prerequisites",
        "Prerequisites",
        "isolation",
        "normal",
        (
            "advertised_gpu_count",
            "advertised_gpu_mem",
            "node_cards_annotation",
            "lost_card_not_advertised",
            "no_pod_on_lost_card",
            "card_back_advertised",
            "xid_card_not_advertised",
            "app_xid_card_kept",
            "no_pod_on_xid_card",
            "xid_card_back_after_restart",
        ),
        # A node reading NVML once at start advertises the right figures too: only a card
        # turning sick (off the bus, or with a critical Xid) tells the two apart.
        deciding=(
            "test_a_card_that_falls_off_the_bus_leaves_the_node_and_gets_no_pod",
            "test_a_card_with_a_critical_xid_leaves_the_node_and_gets_no_pod",
        ),
    ),
    Rule(
        "one_budget_per_container",
        "one memory budget per container",
        "Limitations: memory isolation",
        "GPU memory isolation",
        "isolation",
        "critical",
        (
            "second_process_past_budget",
            "second_process_told",
            "second_process_within_budget",
            "child_reads_the_card",
            "child_card_line",
            "child_total_is_the_share",
            "child_free_after_parent",
            "child_past_budget",
            "smi_lists_the_card",
            "smi_total_while_held",
            "smi_used_while_held",
            "smi_free_while_held",
            "smi_used_plus_free",
            "told_free_while_held",
            "pod_budget_untouched",
            "pod_budget_apart",
            "pod_budget_left",
            "pod_budget_rest",
        ),
    ),
    Rule(
        "memory_comes_back",
        "freed memory comes back",
        "Limitations: memory isolation",
        "GPU memory isolation",
        "isolation",
        "normal",
        (
            "alloc_free_cycles",
            "held_while_alive",
            "reclaimed_after_sigkill",
            "reclaimed_after_exec",
            "exec_same_pid",
            "reclaimed_after_pid_reuse",
        ),
    ),
    # A hostile workload (docs/threat-model.md): what the pod can change must not lift its share.
    Rule(
        "hostile_environment",
        "its environment cannot lift a pod's share",
        "Limitations: memory isolation",
        "GPU memory isolation",
        "hostile",
        "critical",
        ("env_cleared_past_share", "env_raised_past_share", "exec_shell_past_share", "no_gpu_pod_sees_no_card"),
    ),
    Rule(
        "hostile_accounting",
        "overwriting its accounting cannot lift the share",
        "Limitations: memory isolation",
        "GPU memory isolation",
        "hostile",
        "critical",
        ("forged_accounting_past_share", "accounting_copied", "accounting_forged"),
    ),
    Rule(
        "hostile_isolation_files",
        "the isolation's files are out of reach",
        "Limitations: memory isolation",
        "GPU memory isolation",
        "hostile",
        "critical",
        ("isolation_files_read_only",),
    ),
    Rule(
        "hostile_descendants",
        "grandchildren draw from the same budget",
        "Limitations: memory isolation",
        "GPU memory isolation",
        "hostile",
        "critical",
        ("grandchild_past_budget",),
    ),
    Rule(
        "hostile_extender",
        "a pod cannot bind pods through the extender",
        "How it works",
        "Each card contributes",
        "hostile",
        "critical",
        ("victim_unbound",),
    ),
    Rule(
        "hostile_extender_view",
        "a pod cannot read other pods from the extender",
        "How it works",
        "Each card contributes",
        "hostile",
        "normal",
        ("extender_names_no_pod",),
    ),
    Rule(
        "hostile_extender_stall",
        "a pod cannot stall the extender",
        "How it works",
        "Each card contributes",
        "hostile",
        "critical",
        ("extender_answers_while_held",),
    ),
    Rule(
        "hostile_allocation",
        "a pod cannot take cards by writing an allocation",
        "How it works",
        "Each card contributes",
        "hostile",
        "critical",
        ("forged_allocation_served",),
    ),
    Rule(
        "hostile_loader",
        "loader tricks lift no share",
        "Limitations: memory isolation",
        "GPU memory isolation",
        "hostile",
        "critical",
        ("loader_trick_past_share",),
    ),
    Rule(
        "hostile_stream_card",
        "a stream is charged to its own card",
        "Limitations: memory isolation",
        "GPU memory isolation",
        "hostile",
        "critical",
        ("stream_card_past_share",),
    ),
    Rule(
        "hostile_processes",
        "many processes stay within the share",
        "Limitations: memory isolation",
        "GPU memory isolation",
        "hostile",
        "critical",
        ("processes_within_share",),
    ),
    Rule(
        "hostile_namespaces",
        "namespaces and mounts lift no share",
        "Limitations: memory isolation",
        "GPU memory isolation",
        "hostile",
        "critical",
        ("namespaces_past_share",),
    ),
    Rule(
        "beyond_interposition",
        "the driver's own symbols lift no share",
        "Limitations: memory isolation",
        "GPU memory isolation",
        "hostile",
        "normal",
        ("symtab_past_share",),
    ),
    Rule(
        "bursts_not_overbooked",
        "bursts: not over-booked, each pod its own cards",
        "How it works",
        "Each card contributes",
        "isolation",
        "critical",
        (
            "node_filled_exactly",
            "card_booked",
            "burst_pod_on_node",
            "pod_sees_its_cards",
            "inspect_agrees_with_annotations",
            "one_more_pending",
        ),
    ),
    Rule(
        "dra_consumable_capacity",
        "DRA: shares consume what the policy says",
        "How it works",
        "Each card contributes",
        "isolation",
        "critical",
        (
            "consumed_as_policy",
            "container_gets_consumed",
            "consumed_within_card",
            "share_ids_distinct",
            "dra_device_shareable",
            "claims_released",
        ),
    ),
    Rule(
        "capacity_returned",
        "capacity returns after a pod ends, any way",
        "Configure multi-GPU sharing",
        "Jobs",
        "lifecycle",
        "normal",
        ("capacity_returned",),
    ),
    Rule(
        "restarts_lose_nothing",
        "restarts lose no allocation",
        "How it works",
        "Each card contributes",
        "lifecycle",
        "normal",
        (
            "holder_cards_kept",
            "no_double_booking",
            "holder_running",
            "rest_schedules",
            "inspect_holder_cards",
            "booked_after_restart",
            "after_restart_one_more_pending",
        ),
    ),
    Rule(
        "compute_shared",
        "compute is shared (information)",
        "Limitations",
        "computing power sharing only",
        "limitation",
        "trivial",
        ("compute_isolation", "no_compute_limit_env", "no_compute_resource", "whole_card"),
        kind="info",
    ),
)
RULES: dict[str, Rule] = {r.id: r for r in _RULES}

# Per check function of conformance/ (its name, without parameters).
# Add your check here: title (str.format over its parameters), area (a key of AREAS),
# the rules it verifies (keys of RULES, the first is its main story), severity.
CHECKS: dict[str, Check] = {
    # test_seed.py
    "test_seed_job_gets_4gib_on_each_of_2_cards": Check(
        "The seed's Job gets 4 GiB on each of 2 cards",
        "seed",
        ("multi_gpu_share", "card_count", "isolation_smi", "isolation_log"),
        "blocker",
    ),
    # test_grid.py
    "test_n_gib_over_m_cards_gives_n_over_m_on_each_card": Check(
        "A pod asking {per_card} GiB on each card, gpu-count {cards}, gets it on each card",
        "grid",
        ("multi_gpu_share", "card_count", "isolation_smi"),
        "critical",
    ),
    # test_restrictions.py
    "test_gpu_mem_not_divisible_by_gpu_count_is_not_scheduled": Check(
        "N/M not an integer (3 GiB over 2 cards) is not scheduled", "restrictions", ("integer_share",), "critical"
    ),
    "test_gpu_count_above_any_node_cards_is_not_scheduled": Check(
        "More cards than any node has is not scheduled", "restrictions", ("same_node",), "critical"
    ),
    "test_per_card_share_above_card_size_is_not_scheduled": Check(
        "A share larger than a card is not scheduled", "restrictions", ("share_fits_card",), "normal"
    ),
    "test_all_cards_of_a_pod_are_distinct_and_on_its_node": Check(
        "A pod's cards are distinct, on its node, and the only ones it sees",
        "restrictions",
        ("distinct_cards", "same_node", "card_count"),
        "critical",
    ),
    # test_isolation.py
    "test_allocation_up_to_share_succeeds_and_past_share_fails_out_of_memory": Check(
        "Allocating the share works, one MiB past it is out of memory",
        "isolation",
        ("alloc_past_share_refused", "isolation_smi"),
        "critical",
    ),
    "test_two_pods_on_the_same_cards_each_see_their_share_and_never_exceed_a_card": Check(
        "Two pods on the same cards each see their share and never exceed a card",
        "isolation",
        ("alloc_past_share_refused", "isolation_smi"),
        "critical",
    ),
    "test_node_advertising_matches_nvml_inventory": Check(
        "The node advertises the cards NVML reports", "isolation", ("node_advertises",), "normal"
    ),
    "test_all_that_a_process_is_told_is_free_can_be_allocated": Check(
        "All that a process is told is free can be allocated, to the byte",
        "isolation",
        ("alloc_past_share_refused",),
        "critical",
    ),
    "test_a_process_narrowed_to_one_card_is_charged_on_that_card": Check(
        "A process narrowed to one card (CUDA_VISIBLE_DEVICES) is charged on that card",
        "isolation",
        ("alloc_past_share_refused",),
        "critical",
    ),
    "test_pods_on_one_card_hold_their_shares_at_once_and_touch_no_other_budget": Check(
        "Pods on one card hold their shares at once and touch no other pod's budget",
        "isolation",
        ("one_budget_per_container", "alloc_past_share_refused"),
        "critical",
    ),
    "test_memory_still_mapped_stays_charged_after_its_handle_is_released": Check(
        "Memory still mapped stays charged after its handle is released, until its last unmap",
        "isolation",
        ("alloc_past_share_refused",),
        "critical",
    ),
    "test_every_allocation_path_is_held_to_the_share": Check(
        "Allocation path {api}: the share works, one MiB past it is out of memory",
        "isolation",
        ("alloc_past_share_refused",),
        "critical",
    ),
    # test_budget.py
    "test_second_process_of_a_container_gets_only_what_the_first_left": Check(
        "A second process of a container gets only what the first left of the budget",
        "isolation",
        ("one_budget_per_container",),
        "critical",
    ),
    "test_another_process_sees_what_a_working_process_holds": Check(
        "Another process sees what a working process holds (nvidia-smi used and free, cuMemGetInfo)",
        "isolation",
        ("one_budget_per_container",),
        "critical",
    ),
    "test_child_of_a_process_using_the_card_sees_the_same_share_and_budget": Check(
        "A child of a process using the card sees the same share and budget",
        "isolation",
        ("one_budget_per_container",),
        "critical",
    ),
    "test_memory_freed_in_a_process_comes_back_every_time": Check(
        "Memory freed in a process comes back, allocation after allocation",
        "isolation",
        ("memory_comes_back",),
        "normal",
    ),
    # test_bypass.py
    "test_a_loader_trick_lifts_no_share": Check(
        "A loader trick ({trick}) lifts no share", "hostile", ("hostile_loader",), "critical"
    ),
    "test_reading_the_drivers_own_symbol_table": Check(
        "The driver's own symbol table, read by the workload (beyond a library)",
        "hostile",
        ("beyond_interposition",),
        "normal",
    ),
    "test_a_stream_of_another_card_is_charged_to_that_card": Check(
        "A stream of another card is charged to that card", "hostile", ("hostile_stream_card",), "critical"
    ),
    "test_a_pods_processes_take_no_more_of_the_card_than_its_share": Check(
        "Many processes take no more of the card than the share", "hostile", ("hostile_processes",), "critical"
    ),
    "test_namespaces_and_mounts_lift_no_share": Check(
        "Namespaces and mounts lift no share", "hostile", ("hostile_namespaces",), "critical"
    ),
    "test_the_files_the_isolation_runs_from_are_out_of_the_pods_reach": Check(
        "The files the isolation runs from are out of the pod's reach",
        "hostile",
        ("hostile_isolation_files",),
        "critical",
    ),
    "test_clearing_the_isolation_variables_lifts_no_share": Check(
        "Clearing the isolation's variables lifts no share", "hostile", ("hostile_environment",), "critical"
    ),
    "test_raising_the_limit_variables_lifts_no_share": Check(
        "Raising the limit variables lifts no share", "hostile", ("hostile_environment",), "critical"
    ),
    "test_a_shell_started_by_exec_gets_no_more_than_the_share": Check(
        "A shell started by exec gets no more than the share", "hostile", ("hostile_environment",), "critical"
    ),
    "test_a_pod_asking_no_gpu_gets_no_card_by_naming_them_all": Check(
        "A pod asking no GPU gets no card by setting NVIDIA_VISIBLE_DEVICES=all",
        "hostile",
        ("hostile_environment",),
        "critical",
    ),
    "test_overwriting_the_accounting_lifts_no_share": Check(
        "Zeroing, rolling back or replacing the accounting files lifts no share",
        "hostile",
        ("hostile_accounting",),
        "critical",
    ),
    "test_a_grandchild_draws_from_the_same_budget": Check(
        "A grandchild draws from the same budget", "hostile", ("hostile_descendants",), "critical"
    ),
    "test_a_pod_cannot_bind_pods_through_the_extender": Check(
        "A pod posting a bind to the extender binds nothing", "hostile", ("hostile_extender",), "critical"
    ),
    "test_a_pod_cannot_read_other_pods_from_the_extender": Check(
        "A pod reading the extender finds no other pod named", "hostile", ("hostile_extender_view",), "normal"
    ),
    "test_a_pod_holding_connections_open_cannot_stall_the_extender": Check(
        "A pod holding hundreds of slow connections open to the extender stalls nothing",
        "hostile",
        ("hostile_extender_stall",),
        "critical",
    ),
    "test_a_pod_created_with_another_pods_allocation_gets_no_card": Check(
        "A pod created with another pod's allocation gets no card", "hostile", ("hostile_allocation",), "critical"
    ),
    "test_memory_of_a_killed_process_comes_back": Check(
        "Memory of a process killed with SIGKILL comes back", "isolation", ("memory_comes_back",), "normal"
    ),
    "test_a_process_given_a_dead_ones_pid_can_take_the_whole_share": Check(
        "A process given a dead one's pid finds nothing of it charged",
        "isolation",
        ("memory_comes_back",),
        "normal",
    ),
    "test_a_program_started_by_exec_can_take_the_whole_share": Check(
        "A program that replaces its process by exec finds nothing of it charged",
        "isolation",
        ("memory_comes_back",),
        "normal",
    ),
    # test_burst.py
    "test_a_burst_that_fills_a_node_runs_and_overbooks_no_card": Check(
        "A burst that fills a node exactly runs, over-books no card, and one more stays Pending",
        "isolation",
        ("bursts_not_overbooked",),
        "critical",
    ),
    "test_a_burst_right_after_an_extender_restart_books_no_card_twice": Check(
        "A burst right after the extender restarts books no card twice",
        "lifecycle",
        ("restarts_lose_nothing", "bursts_not_overbooked"),
        "critical",
    ),
    # test_dra_capacity.py
    "test_consumable_capacity_keeps_its_promises": Check(
        "DRA consumable capacity: shares consume what the request policy says, and the container gets it",
        "isolation",
        ("dra_consumable_capacity",),
        "critical",
    ),
    # test_sick_card.py
    "test_a_card_that_falls_off_the_bus_leaves_the_node_and_gets_no_pod": Check(
        "A card that falls off the bus leaves what the node advertises and gets no new pod",
        "isolation",
        ("node_advertises",),
        "critical",
    ),
    "test_a_card_with_a_critical_xid_leaves_the_node_and_gets_no_pod": Check(
        "A card with a critical Xid error leaves what the node advertises and gets no new pod; "
        "an application's Xid leaves its card",
        "isolation",
        ("node_advertises",),
        "critical",
    ),
    # test_multinode.py
    "test_m_cards_free_only_across_nodes_stay_pending_never_split": Check(
        "M cards free only across nodes: the pod stays Pending, never split", "restrictions", ("same_node",), "critical"
    ),
    "test_a_pod_that_fits_on_a_second_node_goes_there_when_the_first_is_full": Check(
        "A pod that fits on a second node goes there when the first is full",
        "restrictions",
        ("same_node", "distinct_cards"),
        "normal",
    ),
    # test_lifecycle.py
    "test_capacity_returns_after_the_job_completes": Check(
        "Capacity returns after the Job completes", "lifecycle", ("capacity_returned",), "normal"
    ),
    "test_capacity_returns_after_a_pod_ends_any_way": Check(
        "Capacity returns after a pod that is {ending}", "lifecycle", ("capacity_returned",), "normal"
    ),
    "test_restarting_a_component_loses_no_allocation_and_double_books_nothing": Check(
        "Restarting the {component} loses no allocation and double-books nothing",
        "lifecycle",
        ("restarts_lose_nothing",),
        "normal",
    ),
    # test_limitation.py
    "test_compute_is_shared_not_isolated": Check(
        "Compute is shared, not isolated (the seed's limitation)", "limitation", ("compute_shared",), "minor"
    ),
}


def check_name(nodeid: str) -> str:
    """The check function's name in a pytest node id (``path::name[params]``)."""
    # Parameters first: an id like ``[conformance/x.py::y]`` may hold "::" itself.
    return nodeid.split("[", 1)[0].rsplit("::", 1)[-1]


def check_for(nodeid: str) -> Check | None:
    return CHECKS.get(check_name(nodeid))


def checks_of_rule(rule_id: str) -> list[str]:
    """Check function names verifying ``rule_id``, in registry order."""
    return [name for name, check in CHECKS.items() if rule_id in check.rules]


def validate() -> list[str]:
    """Problems in the registry (unknown rule, area or severity), as sentences."""
    problems = []
    for rule in RULES.values():
        if rule.area not in AREAS:
            problems.append(f"rule {rule.id}: area {rule.area!r} is not one of {', '.join(AREAS)}")
        if rule.severity not in SEVERITIES:
            problems.append(f"rule {rule.id}: severity {rule.severity!r} is not one of {', '.join(SEVERITIES)}")
    for name, check in CHECKS.items():
        if check.area not in AREAS:
            problems.append(f"check {name}: area {check.area!r} is not one of {', '.join(AREAS)}")
        if check.severity not in SEVERITIES:
            problems.append(f"check {name}: severity {check.severity!r} is not one of {', '.join(SEVERITIES)}")
        if not check.rules:
            problems.append(f"check {name}: verifies no rule")
        problems += [f"check {name}: unknown rule {r!r}" for r in check.rules if r not in RULES]
    for rule in RULES.values():
        problems += [
            f"rule {rule.id}: deciding check {name!r} is not a check of this rule"
            for name in rule.deciding
            if name not in CHECKS or rule.id not in CHECKS[name].rules
        ]
    return problems
