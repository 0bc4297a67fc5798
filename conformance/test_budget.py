"""One budget per container, whatever its processes, and memory that comes back.

The share is the container's: a second process, or a child of a process already using
the card, draws from what the first left, not from a budget of its own. Memory a
process frees is its share again, in the same process, as many times as it likes; a
process killed with SIGKILL gives back what it held, so the next one can take the
whole share.
"""

from __future__ import annotations

import re

import allure
import pytest

from gpushare_conformance import names
from gpushare_conformance.allocation import card_totals_mib
from gpushare_conformance.fixtures.framework import verdicts as v

pytestmark = [pytest.mark.e2e, pytest.mark.isolation, pytest.mark.capacity(cards=1)]

OOM = names.OOM_ERROR
SHARE_GIB = 2
# What the first process leaves free of the budget.
REST_MIB = 512
# Allocation headroom below the share for context/driver overhead on real cards.
HEADROOM_MIB = 64
CYCLES = 20
RAW_LINE = re.compile(r"device=0 .*total_bytes=(\d+) free_bytes=(\d+)")


def _share_pod(suite, name: str) -> tuple[str, int]:
    """A pod with SHARE_GIB on one card, and its budget in MiB as nvidia-smi shows it."""
    reason = suite.profile.isolation_skip_reason()
    if reason:
        pytest.skip(reason)
    if not suite.profile.probe_path:
        pytest.skip(f"stack profile {suite.profile.name!r} mounts no allocation probe")
    with allure.step(f"Run a pod with {SHARE_GIB} GiB on one card"):
        pod = suite.submit_share_pod(name, SHARE_GIB, None)
        suite.wait_running(pod)
    budget = card_totals_mib(suite.nvidia_smi_exec(pod))[0]
    return pod, budget


def test_second_process_of_a_container_gets_only_what_the_first_left(suite):
    pod, budget = _share_pod(suite, "two-procs")
    held = budget - REST_MIB
    with allure.step(f"A first process allocates {held} MiB of the {budget} MiB budget and holds it"):
        suite.start_holder(pod, "first", 0, held)
    over = REST_MIB + 1
    with allure.step(f"A second process asking the rest plus 1 MiB ({over} MiB) fails with {OOM}"):
        bad = suite.probe(pod, 0, over)
        suite.expect(
            v.fails_with(
                f"second_process_past_budget[first holds {held} MiB + asks {over} MiB > budget {budget} MiB]",
                bad.exit_status,
                bad.output,
                OOM,
            )
        )
    rest = REST_MIB - HEADROOM_MIB
    with allure.step(f"A second process asking the rest ({rest} MiB) succeeds"):
        ok = suite.probe(pod, 0, rest)
        suite.expect(
            v.exit_ok(
                f"second_process_within_budget[first holds {held} MiB + asks {rest} MiB <= budget {budget} MiB]",
                ok.exit_status,
                ok.output,
            )
        )
    suite.info(
        "one_budget_per_container",
        f"budget {budget} MiB; first process held {held} MiB; a second was refused {over} MiB and granted {rest} MiB",
    )


def test_child_of_a_process_using_the_card_sees_the_same_share_and_budget(suite):
    pod, budget = _share_pod(suite, "child")
    held = budget - REST_MIB
    with allure.step(
        f"A process holding {held} MiB starts a child: the child sees the same total, and the parent's use"
    ):
        seen = suite.probe(pod, 0, held, "--then-exec", suite.profile.probe_path, "--raw")
        suite.expect(v.exit_ok("child_reads_the_card", seen.exit_status, seen.output))
        line = RAW_LINE.search(seen.stdout)
        suite.expect(v.matches("child_card_line", RAW_LINE.pattern, seen.stdout, "child's card line"))
        total_mib, free_mib = int(line.group(1)) >> 20, int(line.group(2)) >> 20
        suite.expect(v.equal("child_total_is_the_share", budget, total_mib, "the child's total (MiB)"))
        suite.expect(
            v.at_most(
                "child_free_after_parent",
                free_mib,
                budget - held,
                "MiB",
                f"the child's free while its parent holds {held} of {budget} MiB",
            )
        )
    over = REST_MIB + 1
    with allure.step(f"The child asking the rest plus 1 MiB ({over} MiB) fails with {OOM}"):
        bad = suite.probe(pod, 0, held, "--then-exec", *suite.probe_argv(0, over))
        suite.expect(
            v.fails_with(
                f"child_past_budget[parent holds {held} MiB + child asks {over} MiB > budget {budget} MiB]",
                bad.exit_status,
                bad.output,
                OOM,
            )
        )
    suite.info(
        "child_budget",
        f"budget {budget} MiB; parent held {held} MiB; the child saw {free_mib} MiB free "
        f"of {total_mib} MiB and was refused {over} MiB",
    )


def test_memory_freed_in_a_process_comes_back_every_time(suite):
    pod, budget = _share_pod(suite, "cycles")
    whole = budget - HEADROOM_MIB
    with allure.step(f"One process allocates {whole} MiB of the {budget} MiB budget, frees it, {CYCLES} times"):
        done = suite.probe(pod, 0, whole, "--cycles", str(CYCLES))
        suite.expect(
            v.exit_ok(f"alloc_free_cycles[{CYCLES} x {whole} MiB of {budget} MiB]", done.exit_status, done.output)
        )


def test_memory_of_a_killed_process_comes_back(suite):
    pod, budget = _share_pod(suite, "killed")
    whole = budget - HEADROOM_MIB
    with allure.step(f"A process holds {whole} MiB of the {budget} MiB budget"):
        pid = suite.start_holder(pod, "victim", 0, whole)
        past = HEADROOM_MIB + 1
        held = suite.probe(pod, 0, past)
        suite.expect(
            v.fails_with(
                f"held_while_alive[{whole} MiB held + {past} MiB > {budget} MiB]", held.exit_status, held.output, OOM
            )
        )
    with allure.step(f"kill -9 the holder (pid {pid})"):
        suite.kill_in_pod(pod, pid, "KILL")
    with allure.step(f"The next process can take the whole share ({whole} MiB) again"):
        again = suite.probe(pod, 0, whole)
        suite.expect(
            v.exit_ok(
                f"reclaimed_after_sigkill[{whole} MiB of {budget} MiB after the holder of {whole} MiB was killed]",
                again.exit_status,
                again.output,
            )
        )
