"""A hostile workload, one attack class at a time: the loader, the card a stream is on,
many processes, namespaces and mounts, and what no interposition library can hold.

Each check runs a pod with a share, makes the attempt a workload could make with
ordinary APIs (``gpushare-attack``, the suite's own program, in the suite's image), and
judges the stack by what the driver granted, or by what the card holds as NVML on the
node reports it. docs/threat-model.md says who the attacker is and which layer can hold
what. Nothing here knows how a stack isolates: the attempts are the workload's.
"""

from __future__ import annotations

import re
import time

import allure
import pytest

from gpushare_conformance import names
from gpushare_conformance.allocation import Verdict, card_totals_mib, check_card_total
from gpushare_conformance.fixtures.framework import verdicts as v

pytestmark = [pytest.mark.e2e, pytest.mark.isolation]

OOM = names.OOM_ERROR
SHARE_GIB = 1
# Tricks that find the driver's entry points around an isolation library that does not
# hold the loader; an interposition library can hold each (docs/threat-model.md).
LOADER_TRICKS = {
    "deepbind": "a library opened with RTLD_DEEPBIND that links libcuda",
    "dlmopen": "that library loaded into a new link-map namespace (dlmopen)",
    "dlvsym": "the C library's dlsym fetched by version (dlvsym)",
    "preload": "a preload of the workload's own defining dlsym, loaded first",
}
PRELOAD_LIB = f"{names.ATTACK_LIB_DIR}/libgpushare-attack-dlsym.so"


def _share_pod(suite, name: str, cards: int | None = None, total_gib: int = SHARE_GIB) -> tuple[str, list[int]]:
    """A pod with ``total_gib`` over ``cards``, and its cards' totals as nvidia-smi shows them."""
    with allure.step(f"Run a pod with {total_gib} GiB over {cards or 1} card(s)"):
        pod = suite.submit_share_pod(name, total_gib, cards)
        obj = suite.wait_running(pod)
    shown = card_totals_mib(suite.nvidia_smi_exec(pod))
    # The premise: the pod is shown its share, not the card (past a whole card, the
    # card itself refuses, and a refusal would prove nothing of the isolation).
    for visible, total in sorted(shown.items()):
        suite.expect(check_card_total(total, total_gib // (cards or 1), suite.physical_mib(obj, visible)))
    return pod, shown


def _attack_argv(*args: str) -> list[str]:
    return [names.ATTACK, *args]


def _loader_argv(trick: str, mib: int) -> list[str]:
    argv = _attack_argv("loader", trick, "--device", "0", "--alloc-mib", str(mib), "--lib-dir", names.ATTACK_LIB_DIR)
    if trick != "preload":
        return argv
    # The workload's own preload goes first, before anything the stack preloads.
    script = f'LD_PRELOAD={PRELOAD_LIB}${{LD_PRELOAD:+:$LD_PRELOAD}} exec "$@"'
    return ["sh", "-c", script, "sh", *argv]


def _not_judged_unless_it_ran(suite, pod: str, check: str, argv: list[str], what: str) -> None:
    """The attempt, asked for 64 MiB (well within the share), must run and be granted:
    otherwise the pod could not make it (a missing library, a driver without the entry
    point) and a refusal past the share would prove nothing."""
    control = suite.run_in_pod(pod, argv, f"{what}: 64 MiB")
    if control.exit_status != 0:
        pytest.skip(suite.not_judged(check, f"{what} could not be made in the pod: {control.output.strip()[-300:]}"))


@pytest.mark.capacity(cards=1)
@pytest.mark.parametrize("trick", list(LOADER_TRICKS))
def test_a_loader_trick_lifts_no_share(suite, trick):
    pod, shown = _share_pod(suite, f"loader-{trick}")
    what = LOADER_TRICKS[trick]
    check = "loader_trick_past_share"
    _not_judged_unless_it_ran(suite, pod, check, _loader_argv(trick, 64), f"cuMemAlloc_v2 through {what}")
    past = shown[0] + 1
    with allure.step(f"Through {what}, {past} MiB (past the {shown[0]} MiB share) fails with {OOM}"):
        result = suite.run_in_pod(pod, _loader_argv(trick, past), f"{trick}: {past} MiB")
        suite.expect(
            v.fails_with(
                check, result.exit_status, result.output, OOM, f"{past} MiB on a {shown[0]} MiB share through {what}"
            )
        )


@pytest.mark.capacity(cards=1)
def test_reading_the_drivers_own_symbol_table(suite):
    """Beyond an interposition library (docs/threat-model.md): a process that reads
    libcuda's dynamic symbol table itself calls the driver's own cuMemAlloc_v2. A stack
    that holds below the library (a kernel module, the hardware) refuses it; one that
    does not is reported as open here, with the figure, never as passing."""
    pod, shown = _share_pod(suite, "loader-symtab")
    check = "symtab_past_share"
    what = "cuMemAlloc_v2 read from libcuda's own symbol table"
    _not_judged_unless_it_ran(suite, pod, check, _loader_argv("symtab", 64), what)
    past = shown[0] + 1
    with allure.step(f"Through {what}, {past} MiB (past the {shown[0]} MiB share)"):
        result = suite.run_in_pod(pod, _loader_argv("symtab", past), f"symtab: {past} MiB")
    suite.open_beyond(
        v.fails_with(
            check, result.exit_status, result.output, OOM, f"{past} MiB on a {shown[0]} MiB share through {what}"
        )
    )


@pytest.mark.capacity(cards=2)
def test_a_stream_of_another_card_is_charged_to_that_card(suite):
    pod, shown = _share_pod(suite, "stream-card", cards=2, total_gib=2 * SHARE_GIB)
    check = "stream_card_past_share"
    if len(shown) < 2:
        pytest.skip(suite.not_judged(check, f"a pod that asked 2 cards sees {len(shown)}: no other card's stream"))
    argv = _attack_argv("stream", "--device", "0", "--stream-device", "1", "--alloc-mib", "64")
    with allure.step(
        f"Card 1's share ({shown[1]} MiB) is filled; then, with card 0's context current, 64 MiB in stream order "
        f"on a stream of card 1 fails with {OOM}"
    ):
        result = suite.run_in_pod(pod, argv, "stream of card 1 while card 0 is current")
        allure.attach(result.output, "gpushare-attack stream", allure.attachment_type.TEXT)
        if result.exit_status == 1:
            pytest.skip(suite.not_judged(check, f"the attempt could not be made: {result.output.strip()[-300:]}"))
        said = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.output.strip()[-200:]
        filled = re.search(r"(\d+) MiB (?:held there|filled its share)", result.output)
        if filled and int(filled.group(1)) > shown[1]:
            # Card 1 said more than its share was free: there is no budget to charge a
            # stream to, whatever the card itself refused next.
            taken = filled.group(1)
            detail = f"filling card 1's {shown[1]} MiB share took {taken} MiB: {said}"
            suite.expect(Verdict(check, f"<= {shown[1]} MiB", f"{taken} MiB", False, detail))
        held = filled.group(1) if filled else "?"
        what = f"64 MiB on a stream of card 1 while card 0 is current, card 1's {shown[1]} MiB share full ({held} MiB held)"
        suite.expect(v.fails_with(check, result.exit_status, result.output, OOM, what))


# Start processes that each hold a context and 1 MiB on the pod's card, one after the
# other; print how each fared.
CONTEXTS = r"""
n=$1; shift
for i in $(seq 1 "$n"); do
  ( "$@" > /tmp/ctx$i.log 2>&1 & echo $! > /tmp/ctx$i.pid; wait ) > /dev/null 2>&1 &
  for t in $(seq 1 100); do
    grep -qiE "allocated|failed|error" /tmp/ctx$i.log 2>/dev/null && break
    sleep 0.1
  done
  echo "process $i: $(tail -n 1 /tmp/ctx$i.log)"
done
"""


# What NVML lists for the processes holding memory on each card the pod sees (as
# nvidia-smi's Processes table shows it): pid and MiB, one line each.
NVML_PROCESSES = r"""
import pynvml
pynvml.nvmlInit()
for i in range(pynvml.nvmlDeviceGetCount()):
    for p in pynvml.nvmlDeviceGetComputeRunningProcesses(pynvml.nvmlDeviceGetHandleByIndex(i)):
        print(i, p.pid, (p.usedGpuMemory or 0) // 2**20)
"""


def _pod_processes_mib(suite, pod: str) -> tuple[int, int]:
    """What NVML in the pod lists for its processes on its first card: (processes, MiB).
    A real driver lists no process of another PID namespace: (0, 0) there, and the
    node's figure decides."""
    listed = suite.run_in_pod(pod, ["python3", "-c", NVML_PROCESSES], "NVML processes")
    rows = [line.split() for line in listed.stdout.splitlines() if len(line.split()) == 3]
    mib = [int(r[2]) for r in rows if r[0] == "0" and r[2].isdigit()]
    return len(mib), sum(mib)


def _card_used(suite, node: str, uuid: str | None, index: int) -> tuple[int | None, str]:
    gpus, source = suite.nvml_gpus(node)
    card = next((g for g in gpus if (uuid and g.uuid == uuid) or (not uuid and g.index == index)), None)
    return (card.memory_used_mib if card else None), source


@pytest.mark.capacity(cards=1)
def test_a_pods_processes_take_no_more_of_the_card_than_its_share(suite):
    """Each process holding a context costs memory on the card that no allocation call
    names. Many processes must not take the card past the pod's share, out of its
    neighbours': what the card holds for the pod (NVML on the node, before and after)
    stays within the share."""
    pod, shown = _share_pod(suite, "processes")
    check = "processes_within_share"
    obj = suite.pod(pod)
    node = obj["spec"]["nodeName"]
    cards = suite.allocated_cards(obj)
    card = suite.card_of(suite.node_of(obj), cards[0]) if cards else None
    if card is None:
        pytest.skip(suite.not_judged(check, f"the stack records no card for {pod} ({suite.placement_words(obj)})"))
    before, source = _card_used(suite, node, card.uuid, card.index)
    if before is None:
        pytest.skip(suite.not_judged(check, f"NVML on {node} shows no used memory for card {card.index} ({source})"))
    processes = 8
    with allure.step(f"{processes} processes of the pod each hold a CUDA context and 1 MiB"):
        started = suite.run_in_pod(
            pod,
            ["sh", "-c", CONTEXTS, "sh", str(processes), *suite.probe_argv(0, 1, "--hold-seconds", "300")],
            "contexts",
        )
        allure.attach(started.output, "processes", allure.attachment_type.TEXT)
    with allure.step("One more process allocates what it is told is free"):
        suite.run_in_pod(
            pod,
            [
                "sh",
                "-c",
                '( "$@" > /tmp/rest.log 2>&1 & ) ; sleep 2; cat /tmp/rest.log',
                "sh",
                names.PROBE,
                "--device",
                "0",
                "--alloc-free",
                "1",
                "--hold-seconds",
                "300",
            ],
            "the rest",
        )
    time.sleep(1)
    after, source = _card_used(suite, node, card.uuid, card.index)
    listed, listed_mib = _pod_processes_mib(suite, pod)
    granted = sum(1 for line in started.stdout.splitlines() if "allocated" in line)
    node_taken = (after or 0) - before
    taken = max(node_taken, listed_mib)
    detail = (
        f"{granted} of {processes} processes of the pod holding a context, and one taking what it was told free: "
        f"{taken} MiB of card {card.index} for a {shown[0]} MiB share (NVML on the node: used {before} -> {after} MiB, "
        f"{source}; NVML in the pod: {listed} processes, {listed_mib} MiB)"
    )
    if granted and taken == 0:
        pytest.skip(suite.not_judged(check, f"NVML shows nothing held while processes hold contexts: {detail}"))
    suite.expect(Verdict(check, f"<= {shown[0]} MiB", f"{taken} MiB", taken <= shown[0], detail))


# Inside new user and mount namespaces, bind an empty file over /etc/ld.so.preload and
# over every file mounted into the container that is not the runtime's own, then ask
# past the share without LD_PRELOAD. First the posture the pod runs under.
NAMESPACES = r"""
grep -E '^(Seccomp|NoNewPrivs|CapEff):' /proc/self/status | tr -s '\t\n' '  '; echo
exec unshare -Urm sh -c '
: > /tmp/empty
covered=""
for f in /etc/ld.so.preload $(awk "{print \$5}" /proc/self/mountinfo); do
  case "$f" in /etc/hosts|/etc/hostname|/etc/resolv.conf|/dev/termination-log) continue;; esac
  [ -f "$f" ] || continue
  mount --bind /tmp/empty "$f" 2>/dev/null && covered="$covered $f"
done
echo "mounted over:${covered:- nothing}"
exec env -u LD_PRELOAD "$@"
' sh "$@"
"""


@pytest.mark.capacity(cards=1)
def test_namespaces_and_mounts_lift_no_share(suite):
    pod, shown = _share_pod(suite, "namespaces")
    check = "namespaces_past_share"
    past = shown[0] + 1
    with allure.step(
        f"In new user and mount namespaces, with empty files mounted over the isolation's, {past} MiB fails"
    ):
        result = suite.run_in_pod(
            pod, ["sh", "-c", NAMESPACES, "sh", *suite.probe_argv(0, past)], "namespaces and mounts"
        )
        allure.attach(result.output, "unshare and mounts", allure.attachment_type.TEXT)
    lines = result.output.strip().splitlines()
    posture = lines[0].strip() if lines else ""
    suite.info("pod_posture", f"the pod runs with {posture or 'an unreadable /proc/self/status'}")
    if "unshare:" in result.output:
        refused = next(line for line in lines if "unshare:" in line).strip()
        detail = f"no user namespace for the pod ({refused}; {posture})"
        suite.expect(Verdict(check, "no namespace, or refused", "no namespace", True, detail))
        return
    covered = next((line for line in lines if line.startswith("mounted over:")), "mounted over: unknown")
    suite.expect(v.fails_with(check, result.exit_status, result.output, OOM, f"{past} MiB after {covered} ({posture})"))
