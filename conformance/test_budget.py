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

from gpushare_conformance import calibration, names
from gpushare_conformance.allocation import card_totals_mib, check_card_total
from gpushare_conformance.fixtures.framework import verdicts as v

pytestmark = [pytest.mark.e2e, pytest.mark.isolation, pytest.mark.capacity(cards=1)]

OOM = names.OOM_ERROR
SHARE_GIB = 2
CYCLES = 20
RAW_LINE = re.compile(r"device=0 .*total_bytes=(\d+) free_bytes=(\d+)")


def _share_pod(suite, name: str, judge_share: bool = True) -> tuple[str, int, int]:
    """A pod with SHARE_GIB on one card; its budget in MiB as nvidia-smi shows it, and
    what a new process of it is told is free (the budget less that process's context).

    The budget must be the share, not the card: on a stack that does not isolate there
    is no budget to share, and a budget check fails here with the physical total. The
    checks of memory coming back pass ``judge_share=False``: they judge their own rule
    on whatever the pod shows (the whole card, where nothing isolates), so a stack
    without isolation is still shown to give freed memory back, or not."""
    with allure.step(f"Run a pod with {SHARE_GIB} GiB on one card"):
        pod = suite.submit_share_pod(name, SHARE_GIB, None)
        obj = suite.wait_running(pod)
    budget = card_totals_mib(suite.nvidia_smi_exec(pod))[0]
    if not judge_share:
        told = suite.told(pod, 0)
        suite.info("budget_shown", f"card 0 shows {budget} MiB; a new process is told {told.free_mib} MiB free")
        return pod, budget, told.free_mib
    with allure.step(f"The card shows the {SHARE_GIB} GiB share, and a process is told about that much free"):
        suite.expect(check_card_total(budget, SHARE_GIB, suite.physical_mib(obj, 0)))
        told = suite.told(pod, 0)
        suite.expect(calibration.share_usable("share_usable[card 0]", told.free_mib, budget))
    return pod, budget, told.free_mib


def test_second_process_of_a_container_gets_only_what_the_first_left(suite):
    pod, budget, _ = _share_pod(suite, "two-procs")
    held = budget // 4
    left = budget - held
    with allure.step(f"A first process allocates {held} MiB of the {budget} MiB budget and holds it"):
        suite.start_holder(pod, "first", 0, held)
    over = left + 1
    with allure.step(f"A second process asking what the first left plus 1 MiB ({over} MiB) fails with {OOM}"):
        bad = suite.probe(pod, 0, over)
        suite.expect(
            v.fails_with(
                f"second_process_past_budget[first holds {held} MiB + asks {over} MiB > budget {budget} MiB]",
                bad.exit_status,
                bad.output,
                OOM,
                f"a second process's {over} MiB (the first holds {held} of {budget} MiB)",
            )
        )
    with allure.step(f"A second process is told at most the {left} MiB the first left (two contexts aside)"):
        told = suite.told(pod, 0)
        suite.expect(
            calibration.share_usable(
                f"second_process_told[first holds {held} MiB of {budget} MiB]", told.free_mib, left, processes=2
            )
        )
    rest = calibration.within_told(told.free_mib)
    with allure.step(f"A second process asking what it is told is free ({rest} MiB) succeeds"):
        ok = suite.probe(pod, 0, rest)
        suite.expect(
            v.exit_ok(
                f"second_process_within_budget[first holds {held} MiB + asks {rest} MiB <= budget {budget} MiB]",
                ok.exit_status,
                ok.output,
                f"a second process's {rest} MiB (the first holds {held} of {budget} MiB)",
            )
        )
    suite.info(
        "one_budget_per_container",
        f"budget {budget} MiB; first process held {held} MiB; a second was refused {over} MiB and granted {rest} MiB",
    )


# nvidia-smi's figures of the card, in MiB, as a person would ask for them.
SMI_MEMORY_QUERY = ("--query-gpu=index,memory.total,memory.used,memory.free", "--format=csv,nounits")
# nvidia-smi prints used and free each rounded down to a MiB.
SMI_ROUNDING_MIB = 2


def test_another_process_sees_what_a_working_process_holds(suite):
    """While one process works, the others of the pod see it: nvidia-smi (NVML) shows
    used at least what is held, free at most the share less it, used + free the share;
    a new process's cuMemGetInfo shows no more free than the share less what is held."""
    pod, budget, _ = _share_pod(suite, "sees-work")
    held = budget // 2
    with allure.step(f"A process holds {held} MiB of the {budget} MiB budget"):
        suite.start_holder(pod, "worker", 0, held)
    with allure.step(f"nvidia-smi in another process: used >= {held} MiB, free <= {budget - held} MiB, sum {budget}"):
        report = suite.nvidia_smi_exec(pod, SMI_MEMORY_QUERY)
        gpu = next((g for g in report.gpus if g.index == 0), None)
        suite.expect(v.equal("smi_lists_the_card", True, gpu is not None, "nvidia-smi lists card 0"))
        used, free, total = gpu.memory_used_mib, gpu.memory_free_mib, gpu.memory_total_mib
        while_held = f"while another process holds {held} of {budget} MiB"
        suite.expect(v.equal("smi_total_while_held", budget, total, f"nvidia-smi's total {while_held} (MiB)"))
        suite.expect(v.within("smi_used_while_held", used, held, budget, "MiB", f"nvidia-smi's used {while_held}"))
        suite.expect(v.within("smi_free_while_held", free, 0, budget - held, "MiB", f"nvidia-smi's free {while_held}"))
        if used is not None and free is not None:
            suite.expect(
                v.within(
                    "smi_used_plus_free",
                    used + free,
                    budget - SMI_ROUNDING_MIB,
                    budget,
                    "MiB",
                    f"nvidia-smi's used + free ({used} + {free}) {while_held}",
                )
            )
    with allure.step(f"A new process's cuMemGetInfo: free <= {budget - held} MiB"):
        told = suite.told(pod, 0)
        suite.expect(
            v.at_most(
                "told_free_while_held",
                told.free_mib,
                budget - held,
                "MiB",
                f"a new process's cuMemGetInfo free {while_held}",
            )
        )
    suite.info(
        "seen_while_working",
        f"budget {budget} MiB; a process held {held} MiB; nvidia-smi showed used {used}, free {free} MiB; "
        f"a new process was told {told.free_mib} MiB free",
    )


def test_child_of_a_process_using_the_card_sees_the_same_share_and_budget(suite):
    pod, budget, _ = _share_pod(suite, "child")
    held = budget // 4
    with allure.step(
        f"A process holding {held} MiB starts a child: the child sees the same total, and the parent's use"
    ):
        seen = suite.probe(pod, 0, held, "--then-exec", names.PROBE, "--raw")
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
    over = budget - held + 1
    with allure.step(f"The child asking the rest plus 1 MiB ({over} MiB) fails with {OOM}"):
        bad = suite.probe(pod, 0, held, "--then-exec", *suite.probe_argv(0, over))
        suite.expect(
            v.fails_with(
                f"child_past_budget[parent holds {held} MiB + child asks {over} MiB > budget {budget} MiB]",
                bad.exit_status,
                bad.output,
                OOM,
                f"the child's {over} MiB (its parent holds {held} of {budget} MiB)",
            )
        )
    suite.info(
        "child_budget",
        f"budget {budget} MiB; parent held {held} MiB; the child saw {free_mib} MiB free "
        f"of {total_mib} MiB and was refused {over} MiB",
    )


def test_memory_freed_in_a_process_comes_back_every_time(suite):
    pod, budget, free = _share_pod(suite, "cycles", judge_share=False)
    whole = calibration.within_told(free)
    with allure.step(f"One process allocates {whole} MiB of the {budget} MiB budget, frees it, {CYCLES} times"):
        done = suite.probe(pod, 0, whole, "--cycles", str(CYCLES))
        suite.expect(
            v.exit_ok(
                f"alloc_free_cycles[{CYCLES} x {whole} MiB of {budget} MiB]",
                done.exit_status,
                done.output,
                f"{CYCLES} x {whole} MiB allocated and freed in one process",
            )
        )


def test_memory_of_a_killed_process_comes_back(suite):
    pod, budget, free = _share_pod(suite, "killed", judge_share=False)
    whole = calibration.within_told(free)
    physical = suite.physical_mib(suite.pod(pod), 0)
    with allure.step(f"A process holds {whole} MiB of the {budget} MiB budget"):
        pid = suite.start_holder(pod, "victim", 0, whole)
        if physical is not None and budget >= physical:
            # No budget (the card shows its physical size): what the holder keeps is the
            # card's own memory, which NVML lists as used while the holder lives.
            report = suite.nvidia_smi_exec(pod, SMI_MEMORY_QUERY)
            gpu = next((g for g in report.gpus if g.index == 0), None)
            suite.expect(
                v.within(
                    f"held_while_alive[{whole} MiB held on a card without a budget]",
                    gpu.memory_used_mib if gpu else None,
                    whole,
                    budget,
                    "MiB",
                    f"nvidia-smi's used on card 0 while another process holds {whole} MiB (no budget: the card's own)",
                )
            )
        else:
            past = budget - whole + 1
            held = suite.probe(pod, 0, past)
            suite.expect(
                v.fails_with(
                    f"held_while_alive[{whole} MiB held + {past} MiB > {budget} MiB]",
                    held.exit_status,
                    held.output,
                    OOM,
                    f"{past} MiB while another process holds {whole} of {budget} MiB",
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
                f"{whole} MiB after the holder of {whole} MiB was killed",
            )
        )


# Run by the process that allocated, in its place (exec): say this pid, then become the
# probe asking the same again.
AFTER_EXEC = 'echo "pid $$ after exec"; exec "$@"'


def test_a_program_started_by_exec_can_take_the_whole_share(suite):
    """A process that replaces itself (exec: the same pid, a new program) leaves nothing
    of its memory behind: the driver frees it with the old program, so must the share.
    A stack that keys its charges by pid must not carry them over to the new program."""
    pod, budget, free = _share_pod(suite, "exec", judge_share=False)
    whole = calibration.within_told(free)
    argv = [
        names.ATTACK,
        "exec",
        "--device",
        "0",
        "--alloc-mib",
        str(whole),
        "--",
        "sh",
        "-c",
        AFTER_EXEC,
        "sh",
        *suite.probe_argv(0, whole),
    ]
    with allure.step(f"A process holding {whole} MiB of the {budget} MiB budget execs a program asking {whole} MiB"):
        done = suite.run_in_pod(pod, argv, "exec while holding")
    before = re.search(r"^pid (\d+) holds (\d+) MiB", done.stdout, re.MULTILINE)
    after = re.search(r"^pid (\d+) after exec", done.stdout, re.MULTILINE)
    if not before or not after:
        pytest.skip(
            suite.not_judged(
                "reclaimed_after_exec", f"the holder did not hold {whole} MiB and exec: {done.output.strip()[-300:]}"
            )
        )
    suite.expect(
        v.exit_ok(
            f"reclaimed_after_exec[{whole} MiB of {budget} MiB after exec of the holder of {whole} MiB]",
            done.exit_status,
            done.output,
            f"{whole} MiB by the program pid {after.group(1)} became, after it held {whole} MiB",
        )
    )
    suite.expect(
        v.equal("exec_same_pid", before.group(1), after.group(1), f"the pid after exec (pid {before.group(1)} held)")
    )


def test_a_process_given_a_dead_ones_pid_can_take_the_whole_share(suite):
    """A pid of the container given to a new process (in the workload's own PID
    namespace, or by cycling the pids round) carries nothing of the process that had it:
    a stack that keys charges by pid must not charge the new one for the dead one."""
    pod, budget, free = _share_pod(suite, "pid-reuse", judge_share=False)
    whole = calibration.within_told(free)
    check = "reclaimed_after_pid_reuse"
    argv = [names.ATTACK, "pid-reuse", "--device", "0", "--alloc-mib", str(whole), "--", *suite.probe_argv(0, whole)]
    with allure.step(
        f"A holder of {whole} MiB of the {budget} MiB budget is killed; a new process given its pid asks {whole} MiB"
    ):
        done = suite.run_in_pod(pod, argv, "pid reuse")
    held = re.search(r"^holder pid (\d+) holds", done.stdout, re.MULTILINE)
    reused = re.search(r"^pid (\d+) reused", done.stdout, re.MULTILINE)
    if not held or not reused:
        # No user namespace for the pod, and too many pids to cycle round (pid_max):
        # the pid cannot be given, so nothing is shown either way.
        pytest.skip(
            suite.not_judged(check, f"no process could be given a dead one's pid: {done.output.strip()[-300:]}")
        )
    suite.expect(
        v.exit_ok(
            f"{check}[{whole} MiB of {budget} MiB by a new process given the pid of a killed holder of {whole} MiB]",
            done.exit_status,
            done.output,
            f"{whole} MiB by a new process with pid {reused.group(1)}, that of a holder of {whole} MiB killed before "
            f"(holder pid {held.group(1)})",
        )
    )
