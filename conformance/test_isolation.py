"""Memory isolation: a pod can allocate its share on each card and nothing past it;
pods sharing cards each see only their own share and together never exceed a card;
the node advertises what NVML reports.
"""

from __future__ import annotations

import re
from pathlib import Path

import allure
import pytest

from gpushare_conformance import calibration, names
from gpushare_conformance.allocation import Verdict, card_totals_mib, check_card_count, check_card_total
from gpushare_conformance.fixtures.framework import verdicts as v
from gpushare_conformance.fixtures.inventory import cards_from_inventory, load_inventory

pytestmark = [pytest.mark.e2e, pytest.mark.isolation]

OOM = names.OOM_ERROR


def _alloc_within_and_past(suite, pod: str, visible: int, total_mib: int, physical_mib: int | None) -> None:
    """What a process is told is free is the share (less its context); it can have
    that, and one MiB past the share shown is refused."""
    told = suite.told(pod, visible)
    with allure.step(f"Card {visible}: a new process is told {told.free_mib} MiB free of the {total_mib} MiB shown"):
        suite.expect(calibration.share_usable(f"share_usable[card {visible}]", told.free_mib, total_mib))
    within = calibration.within_told(told.free_mib)
    with allure.step(f"Card {visible}: allocating {within} MiB (what it is told is free) succeeds"):
        ok = suite.probe(pod, visible, within)
        suite.expect(
            v.exit_ok(
                f"alloc_within_share[card {visible}: {within} MiB]",
                ok.exit_status,
                ok.output,
                f"{within} MiB on card {visible}",
            )
        )
    past = total_mib + 1
    with allure.step(f"Card {visible}: allocating {past} MiB (past the share) fails with {OOM}"):
        if physical_mib is not None:
            # The over-share allocation must fit the physical card, so only isolation can refuse it.
            suite.expect(v.below(f"past_share_below_physical[card {visible}]", past, physical_mib, "MiB"))
        bad = suite.probe(pod, visible, past)
        suite.expect(
            v.fails_with(
                f"alloc_past_share_oom[card {visible}: {past} MiB]",
                bad.exit_status,
                bad.output,
                OOM,
                f"{past} MiB on card {visible} (shown {total_mib} MiB)",
            )
        )


@pytest.mark.capacity(cards=2)
def test_allocation_up_to_share_succeeds_and_past_share_fails_out_of_memory(suite):
    cards = suite.profile.cards_for(min(2, suite.max_cards))
    per_card = 2
    with allure.step(f"Run a pod with {per_card} GiB on each of {cards} card(s)"):
        pod = suite.submit_share_pod("alloc", per_card * cards, cards if cards > 1 else None)
        obj = suite.wait_running(pod)
    report = suite.nvidia_smi_exec(pod)
    suite.expect(check_card_count(len(report.gpus), cards))
    for visible, total in sorted(card_totals_mib(report).items()):
        physical = suite.physical_mib(obj, visible)
        suite.expect(check_card_total(total, per_card, physical))
        _alloc_within_and_past(suite, pod, visible, total, physical)


@pytest.mark.capacity(cards=1)
def test_all_that_a_process_is_told_is_free_can_be_allocated(suite):
    """The last byte: a process can have exactly what its own cuMemGetInfo says is free,
    in one allocation and in several (checks elsewhere stop short of it by a margin)."""
    per_card = 1
    with allure.step(f"Run a pod with {per_card} GiB on one card"):
        pod = suite.submit_share_pod("last-byte", per_card, None)
        obj = suite.wait_running(pod)
    total = card_totals_mib(suite.nvidia_smi_exec(pod))[0]
    suite.expect(check_card_total(total, per_card, suite.physical_mib(obj, 0)))
    for pieces in (1, 8):
        with allure.step(f"A process allocates all it is told is free, to the byte, in {pieces} allocation(s)"):
            done = suite.run_in_pod(
                pod,
                [names.PROBE, "--device", "0", "--alloc-free", str(pieces)],
                f"probe --alloc-free {pieces} on card 0",
            )
            suite.expect(
                v.exit_ok(
                    f"alloc_all_told_free[{pieces} allocation(s)]",
                    done.exit_status,
                    done.output,
                    f"all a process is told is free on card 0 (shown {total} MiB), in {pieces} allocation(s)",
                )
            )


@pytest.mark.capacity(cards="all")
def test_pods_on_one_card_hold_their_shares_at_once_and_touch_no_other_budget(suite):
    """Budgets across pods: two pods on the same cards, each holding half its share at
    the same moment, both succeed; neither pod's holding lowers or lifts what the other
    may allocate, and one pod's process ending frees nothing of the other's budget."""
    cards = suite.profile.cards_for(len(suite.node.cards))
    first, second = 2, 3
    if first + second > suite.node.card_gib:
        pytest.skip(f"needs cards of at least {first + second} GiB; the node's hold {suite.node.card_gib} GiB")
    with allure.step(f"Two pods over all {cards} card(s): {first} GiB and {second} GiB per card"):
        a = suite.submit_share_pod("budget-a", first * cards, cards)
        b = suite.submit_share_pod("budget-b", second * cards, cards)
        pod_a, pod_b = suite.wait_running(a), suite.wait_running(b)
        suite.expect(
            v.equal(
                "same_cards",
                sorted(suite.allocated_cards(pod_a)),
                sorted(suite.allocated_cards(pod_b)),
                "cards of the second pod",
            )
        )
    budgets = {}
    for name, obj, share in ((a, pod_a, first), (b, pod_b, second)):
        budgets[name] = card_totals_mib(suite.nvidia_smi_exec(name))[0]
        suite.expect(check_card_total(budgets[name], share, suite.physical_mib(obj, 0)))
    # Half of each budget: a stack that charges each process's CUDA context (HAMi's
    # library, ~300 MiB on real cards) still leaves the holder and a second process room.
    held = {name: budget // 2 for name, budget in budgets.items()}
    holders = {}
    with allure.step(f"Both pods hold half their share on card 0 at once: {held[a]} and {held[b]} MiB"):
        holders[a] = suite.start_holder(a, "holder", 0, held[a])
        # The second pod's half, asked once before it is held: a stack that counts one
        # pod's memory against another's refuses it here, with the figures.
        first = suite.probe(b, 0, held[b])
        suite.expect(
            v.exit_ok(
                f"pod_budget_untouched[{b}, {a} holding]",
                first.exit_status,
                first.output,
                f"{b}'s {held[b]} MiB (half its {budgets[b]} MiB) while {a} holds {held[a]} of {budgets[a]} MiB",
            )
        )
        holders[b] = suite.start_holder(b, "holder", 0, held[b])

    def budget_holds(name: str, other: str, when: str) -> None:
        budget, mine = budgets[name], held[name]
        over = budget - mine + 1
        with allure.step(f"{name}: asking the rest of its budget plus 1 MiB ({over} MiB) fails with {OOM} ({when})"):
            bad = suite.probe(name, 0, over)
            suite.expect(
                v.fails_with(
                    f"pod_budget_apart[{name}, {when}]",
                    bad.exit_status,
                    bad.output,
                    OOM,
                    f"{name}'s {over} MiB while it holds {mine} of {budget} MiB ({when})",
                )
            )
        with allure.step(f"{name}: a new process is told about the {budget - mine} MiB it has left ({when})"):
            told = suite.told(name, 0)
            suite.expect(
                calibration.share_usable(f"pod_budget_left[{name}, {when}]", told.free_mib, budget - mine, processes=2)
            )
            rest = calibration.within_told(told.free_mib)
            ok = suite.probe(name, 0, rest)
            suite.expect(
                v.exit_ok(
                    f"pod_budget_rest[{name}, {when}]",
                    ok.exit_status,
                    ok.output,
                    f"{name}'s last {rest} MiB while it holds {mine} of {budget} MiB and {other} holds "
                    f"{held[other]} MiB ({when})",
                )
            )

    budget_holds(a, b, f"{b} holding")
    budget_holds(b, a, f"{a} holding")
    with allure.step(f"{b}'s holder ends: nothing of {a}'s budget is freed"):
        suite.kill_in_pod(b, holders[b], "KILL")
        held[b] = 0
        budget_holds(a, b, f"{b}'s holder killed")
    suite.info(
        "budgets_across_pods",
        f"{a} held {held[a]} of {budgets[a]} MiB and {b} held {budgets[b] // 2} of {budgets[b]} MiB at once; "
        "neither lowered or lifted the other's budget",
    )


@pytest.mark.capacity(cards=2)
def test_a_process_narrowed_to_one_card_is_charged_on_that_card(suite):
    """One card per process: data-parallel training starts one rank per card, each with
    CUDA_VISIBLE_DEVICES naming its card, so every rank's CUDA device 0 is another card.
    Each is charged on the card it really uses, and each gets that card's share."""
    per_card = 2
    with allure.step(f"Run a pod with {per_card} GiB on each of 2 cards"):
        pod = suite.submit_share_pod("one-card-each", per_card * 2, 2)
        obj = suite.wait_running(pod)
    totals = card_totals_mib(suite.nvidia_smi_exec(pod))
    suite.expect(check_card_count(len(totals), 2))
    for visible, total in sorted(totals.items()):
        suite.expect(check_card_total(total, per_card, suite.physical_mib(obj, visible)))
    budget = totals[1]
    told = suite.told(pod, 1)
    held = calibration.within_told(told.free_mib)
    rank = {0: {"CUDA_VISIBLE_DEVICES": "0"}, 1: {"CUDA_VISIBLE_DEVICES": "1"}}
    with allure.step(f"A rank narrowed to card 1 (CUDA_VISIBLE_DEVICES=1) holds {held} MiB on its device 0"):
        suite.start_holder(pod, "rank1", 0, held, env=rank[1])
    with allure.step(f"A rank narrowed to card 0 (CUDA_VISIBLE_DEVICES=0) gets card 0's share too: {held} MiB"):
        ok = suite.probe(pod, 0, held, env=rank[0])
        suite.expect(
            v.exit_ok(
                "narrowed_rank_gets_its_card",
                ok.exit_status,
                ok.output,
                f"{held} MiB by the rank of card 0 while the rank of card 1 holds {held} MiB",
            )
        )
    with allure.step("A process seeing both cards: card 1 has what the rank left, card 0 its whole share"):
        suite.expect(
            v.at_most(
                "narrowed_rank_charged_on_its_card",
                suite.told(pod, 1).free_mib,
                budget - held,
                "MiB",
                f"card 1's free while its rank holds {held} of {budget} MiB",
            )
        )
        card0 = suite.told(pod, 0)
        suite.expect(calibration.share_usable("narrowed_rank_left_card_0", card0.free_mib, totals[0]))
    over = budget - held + 1
    with allure.step(f"Another rank of card 1 asking what is left plus 1 MiB ({over} MiB) fails with {OOM}"):
        bad = suite.probe(pod, 0, over, env=rank[1])
        suite.expect(
            v.fails_with(
                "narrowed_rank_past_share",
                bad.exit_status,
                bad.output,
                OOM,
                f"{over} MiB by a rank of card 1 while another holds {held} of {budget} MiB",
            )
        )


# Every way a program can take device memory (gpushare-probe --api); each must be held
# to the share, and a failure names the path.
ALLOC_PATHS = ("alloc", "pitch", "managed", "async", "pool", "vmm")


@pytest.mark.capacity(cards=1)
@pytest.mark.parametrize("api", ALLOC_PATHS)
def test_every_allocation_path_is_held_to_the_share(suite, api):
    per_card = 1
    with allure.step(f"Run a pod with {per_card} GiB on one card"):
        pod = suite.submit_share_pod(f"path-{api}", per_card, None)
        obj = suite.wait_running(pod)
    total = card_totals_mib(suite.nvidia_smi_exec(pod))[0]
    physical = suite.physical_mib(obj, 0)
    suite.expect(check_card_total(total, per_card, physical))
    told = suite.told(pod, 0)
    suite.expect(calibration.share_usable("share_usable[card 0]", told.free_mib, total))
    within, past = calibration.within_told(told.free_mib), total + 1
    with allure.step(f"--api {api}: allocating {within} MiB (what a process is told is free) succeeds"):
        ok = suite.probe(pod, 0, within, "--api", api)
        suite.expect(v.exit_ok(f"alloc_within_share[--api {api}]", ok.exit_status, ok.output, f"{within} MiB by {api}"))
    with allure.step(f"--api {api}: allocating {past} MiB (past the share) fails with {OOM}"):
        if physical is not None:
            suite.expect(v.below(f"past_share_below_physical[--api {api}]", past, physical, "MiB"))
        bad = suite.probe(pod, 0, past, "--api", api)
        suite.expect(
            v.fails_with(
                f"alloc_past_share_oom[--api {api}]",
                bad.exit_status,
                bad.output,
                OOM,
                f"{past} MiB by {api} (shown {total} MiB)",
            )
        )


# The tries of ``gpushare-attack vmm-release``, in order: the allocation must be refused
# while a mapping holds the memory, and granted once none does.
MAPPED_STAGES = (
    ("mapped twice, handle released", "mapped_memory_held[two mappings]"),
    ("mapped once, handle released", "mapped_memory_held[one of two mappings left]"),
)
UNMAPPED_STAGE = "unmapped, handle released"


def _stage_said(output: str, stage: str) -> tuple[str | None, str]:
    """What the attempt printed for ``stage``: "granted", the CUDA error name, or None
    when it printed nothing for it; and the line itself."""
    found = re.search(rf"^{re.escape(stage)}: alloc \d+ MiB (granted|failed: (\S+))$", output, re.MULTILINE)
    if not found:
        return None, ""
    return (found.group(2) or found.group(1)), found.group(0)


@pytest.mark.capacity(cards=1)
def test_memory_still_mapped_stays_charged_after_its_handle_is_released(suite):
    """The driver keeps a cuMemCreate allocation while any mapping of it is left, even
    once its handle is released: so must the share. A workload that maps its memory
    and releases the handle at once (as CUDA's own samples do) must not find the share
    free again while it still uses every byte of it; only the last cuMemUnmap gives it
    back."""
    per_card = 1
    with allure.step(f"Run a pod with {per_card} GiB on one card"):
        pod = suite.submit_share_pod("vmm-mapped", per_card, None)
        obj = suite.wait_running(pod)
    total = card_totals_mib(suite.nvidia_smi_exec(pod))[0]
    # The premise: the pod is shown its share, not the card.
    suite.expect(check_card_total(total, per_card, suite.physical_mib(obj, 0)))
    check = "mapped_memory_held"
    told = suite.told(pod, 0)
    hold = told.free_mib * 2 // 3 // 2 * 2
    ask = told.free_mib - hold // 2
    if hold <= 0:
        pytest.skip(suite.not_judged(check, f"a new process is told {told.free_mib} MiB free: nothing to hold"))
    argv = [names.ATTACK, "vmm-release", "--device", "0", "--hold-mib", str(hold), "--alloc-mib", str(ask)]
    with allure.step(
        f"One process maps {hold} MiB of one cuMemCreate handle twice and releases the handle; {ask} MiB more "
        f"(past the {told.free_mib} MiB it is told free) fails with {OOM} until the last cuMemUnmap, then succeeds"
    ):
        result = suite.run_in_pod(pod, argv, "vmm-release")
        allure.attach(result.output, "gpushare-attack vmm-release", allure.attachment_type.TEXT)
    held_line = next((line for line in result.stdout.splitlines() if line.startswith("holding ")), "")
    if not held_line:
        pytest.skip(suite.not_judged(check, f"the memory could not be mapped: {result.output.strip()[-300:]}"))
    setting = f"{held_line}; a new process is told {told.free_mib} MiB free of the {total} MiB share"
    for stage, verdict in MAPPED_STAGES:
        said, line = _stage_said(result.stdout, stage)
        suite.expect(
            Verdict(
                verdict,
                OOM,
                said or "no answer",
                said == OOM,
                f"{ask} MiB by cuMemAlloc_v2 ({line or 'not tried: ' + result.output.strip()[-200:]}); {setting}",
            )
        )
    said, line = _stage_said(result.stdout, UNMAPPED_STAGE)
    suite.expect(
        Verdict(
            "mapped_memory_freed_at_unmap",
            "granted",
            said or "no answer",
            said == "granted",
            f"{ask} MiB by cuMemAlloc_v2 once both mappings are gone "
            f"({line or 'not tried: ' + result.output.strip()[-200:]}); {setting}",
        )
    )


@pytest.mark.capacity(cards="all")
def test_two_pods_on_the_same_cards_each_see_their_share_and_never_exceed_a_card(suite):
    cards = suite.profile.cards_for(len(suite.node.cards))
    card_gib = suite.node.card_gib
    first, second = 2, 3
    if first + second > card_gib:
        pytest.skip(f"needs cards of at least {first + second} GiB; the node's hold {card_gib} GiB")
    with allure.step(f"Two pods over all {cards} card(s): {first} GiB and {second} GiB per card"):
        a = suite.submit_share_pod("share-a", first * cards, cards)
        b = suite.submit_share_pod("share-b", second * cards, cards)
        pod_a, pod_b = suite.wait_running(a), suite.wait_running(b)
    with allure.step("Both pods got the same cards"):
        cards_a, cards_b = suite.allocated_cards(pod_a), suite.allocated_cards(pod_b)
        # With one pod per card set, sharing must put both on every card.
        suite.expect(v.equal("same_cards", sorted(cards_a), sorted(cards_b), "cards of the second pod"))
    for name, obj, share in ((a, pod_a, first), (b, pod_b, second)):
        with allure.step(f"{name} sees {share} GiB on each card, and can allocate it, not more"):
            report = suite.nvidia_smi_exec(name)
            suite.expect(check_card_count(len(report.gpus), cards))
            for visible, total in sorted(card_totals_mib(report).items()):
                suite.expect(check_card_total(total, share, suite.physical_mib(obj, visible)))
            _alloc_within_and_past(suite, name, 0, card_totals_mib(report)[0], suite.physical_mib(obj, 0))
    with allure.step("Together they stay within each card: a pod asking the rest plus 1 GiB stays Pending"):
        # Both pods run (positive controls), so a refusal here is the stack's accounting.
        rest = card_gib - first - second
        reason = suite.rejection_reason("overbook", (rest + 1) * cards, cards, verdict="no_overbooking")
        suite.expect(v.matches("no_overbooking", r"\S", reason, "scheduling reason"))
    if suite.profile.inspect_path:
        with allure.step("The extender's books: used never exceeds a card's total"):
            data = suite.inspect()
            over = [
                (n.get("name"), d.get("id"), d.get("usedGPU"), d.get("totalGPU"))
                for n in data.get("nodes", [])
                for d in n.get("devs", [])
                if d.get("usedGPU", 0) > d.get("totalGPU", 0)
            ]
            suite.expect(v.none_of("inspect_used_within_total", over, "cards whose used exceeds total"))


@pytest.mark.capacity(cards=0)
def test_node_advertising_matches_nvml_inventory(suite):
    node = suite.node
    with allure.step("What NVML reports on the node"):
        if suite.options.mocked_nvml and suite.handle.details.get("inventory") and suite.handle.provider == "local":
            inventory = cards_from_inventory(load_inventory(Path(suite.handle.details["inventory"])))
            truth = {c.index: c.memory_mib for c in inventory}
            source = f"mock inventory {suite.handle.details['inventory']}"
        else:
            truth, source = suite.nvml_cards(node.node)
        allure.attach(str(truth), f"NVML cards ({source})", allure.attachment_type.TEXT)
    expected_count = len(truth)
    if suite.profile.per_card_mib:
        # Such a stack advertises card slots (HAMi: nvidia.com/gpu, a number of virtual
        # devices per card) and no memory resource: every card must be there, each with
        # the same number of slots.
        with allure.step(
            f"Node {node.node} advertises {suite.profile.count_resource} for each of {expected_count} cards"
        ):
            slots = node.advertised_count or 0
            whole = slots >= expected_count and slots % expected_count == 0
            suite.expect(
                Verdict(
                    "advertised_gpu_count",
                    f"a multiple of {expected_count} (the cards NVML reports)",
                    slots,
                    whole,
                    f"allocatable {suite.profile.count_resource}={slots} for {expected_count} cards"
                    + (f" ({slots // expected_count} per card)" if whole else ": not the same number for every card"),
                )
            )
        return
    expected_mem = sum(mib // 1024 for mib in truth.values())
    if suite.profile.dra is not None:
        count_source = f"devices of driver {suite.profile.dra.driver} in {node.node}'s ResourceSlices"
        mem_source = f"their {suite.profile.dra.capacity!r} capacity (whole GiB per card, summed)"
    else:
        count_source = f"allocatable {suite.profile.count_resource}"
        mem_source = f"allocatable {suite.profile.memory_resource} (whole GiB per card, summed)"
    with allure.step(f"Node {node.node} advertises {expected_count} cards and {expected_mem} GiB"):
        suite.expect(
            v.equal(
                "advertised_gpu_count",
                expected_count,
                node.advertised_count,
                count_source,
            )
        )
        suite.expect(
            v.equal(
                "advertised_gpu_mem",
                expected_mem,
                node.advertised_mem,
                mem_source,
            )
        )
    if node.source.startswith("annotation"):
        with allure.step("The device plugin's card list matches NVML card by card"):
            seen = {c.index: c.memory_mib for c in node.cards}
            suite.expect(v.equal("node_cards_annotation", truth, seen, node.source))
