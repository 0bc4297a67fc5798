"""Deliberate faults, off by default, for proving the suite catches a broken stack.

Each switch breaks exactly one rule the conformance checks guard, in one small
function, so ``tests/mutation`` can deploy the broken stack and show which check turns
red. Never use them in production: a pod under a fault gets wrong memory limits, is
scheduled against the rules, or runs without isolation. Test doubles: the shipped stack
holds none of this. Each fault is a mixin (end of this module) that overrides one seam
of the stack's policy (``extender/policy.py``, ``deviceplugin/policy.py``,
``dra/policy.py``); ``registry.py`` puts it over a flavor when ``--fault`` names it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpushare_doubles.twin_pairs import TwinPairs
from gpushare_stack import contract, variants
from gpushare_stack.deviceplugin.environment import without_shim
from gpushare_stack.extender.twins import container_sizes
from gpushare_stack.request import ShareRequest, share_request

UNEVEN_SPLIT = "uneven-split"
IGNORE_INTEGER_RULE = "ignore-integer-rule"
NO_ISOLATION = "no-isolation"
STALE_VIEW = "stale-view"
CARDS_ACROSS_NODES = "cards-across-nodes"
PER_PROCESS_BUDGET = "per-process-budget"
LEAK_FREES = "leak-frees"
NO_RECLAIM = "no-reclaim"
UNGUARDED_MANAGED = "unguarded-managed"
SCHEDULE_NOTHING = "schedule-nothing"
EXACT_FIT_REFUSED = "exact-fit-refused"
SMI_IGNORES_USAGE = "smi-ignores-usage"
SHARED_ACCOUNTING = "shared-accounting"
ORDINAL_CARDS = "ordinal-cards"
LOADER_UNHELD = "loader-unheld"
STREAM_CURRENT_CARD = "stream-current-card"
CONTEXTS_UNCHARGED = "contexts-uncharged"
VMM_RELEASE_FREES = "vmm-release-frees"
EXEC_KEEPS_CHARGE = "exec-keeps-charge"
TWINS_AT_ONCE = "twins-at-once"
OPEN_TO_STALLS = "open-to-stalls"
FAILED_PODS_HOLD = "failed-pods-hold"
BLIND_TO_HEALTH = "blind-to-health"
READY_BEFORE_SYNCED = "ready-before-synced"
ISOLATION_FILES_WRITABLE = "isolation-files-writable"
IGNORES_XIDS = "ignores-xids"
EXTENDER_FAULTS = (
    UNEVEN_SPLIT,
    IGNORE_INTEGER_RULE,
    STALE_VIEW,
    CARDS_ACROSS_NODES,
    SCHEDULE_NOTHING,
    TWINS_AT_ONCE,
    OPEN_TO_STALLS,
    FAILED_PODS_HOLD,
    READY_BEFORE_SYNCED,
)
# open-to-stalls: the extender listens where pods reach it (the node's addresses, host
# network), waits this long for a slow client and serves this many connections at once.
STALLS_ADDRESS = "0.0.0.0"
STALLS_DEADLINE_S = 300.0
STALLS_CONNECTIONS = 16
# Faults of the isolation shim: the device plugin passes them to it in SHIM_FAULT_ENV.
SHIM_FAULTS = (
    PER_PROCESS_BUDGET,
    LEAK_FREES,
    NO_RECLAIM,
    UNGUARDED_MANAGED,
    EXACT_FIT_REFUSED,
    SMI_IGNORES_USAGE,
    ORDINAL_CARDS,
    LOADER_UNHELD,
    STREAM_CURRENT_CARD,
    CONTEXTS_UNCHARGED,
    VMM_RELEASE_FREES,
    EXEC_KEEPS_CHARGE,
)
DEVICE_PLUGIN_FAULTS = (
    NO_ISOLATION,
    SHARED_ACCOUNTING,
    BLIND_TO_HEALTH,
    ISOLATION_FILES_WRITABLE,
    IGNORES_XIDS,
    *SHIM_FAULTS,
)
# Faults of the DRA plugin (gpushare-dra-plugin): no-isolation as the device plugin's,
# and a slice that publishes each card with more memory than it has.
OVERCOMMIT_CAPACITY = "overcommit-capacity"
OVERCOMMIT_FACTOR = 2
# request-not-consumed: each share sized from the claim's request, rounded down to whole
# GiB, not from what the allocation consumed.
REQUEST_NOT_CONSUMED = "request-not-consumed"
DRA_PLUGIN_FAULTS = (NO_ISOLATION, OVERCOMMIT_CAPACITY, REQUEST_NOT_CONSUMED)
# shared-accounting: the one accounting file every container of the node is given.
SHARED_USAGE_NAME = "shared-accounting-usage"
SHIM_FAULT_ENV = contract.ENV_SHIM_FAULT
# stale-view: how long a bind waits between choosing cards and writing them, so binds
# of a burst overlap and each chooses from a view without the others.
STALE_VIEW_BIND_DELAY_S = 2.0
# twins-at-once: how long the first of two twins waits for the second to be bound
# before it (twin_pairs.py); the scheduler sends the binds of pods queued together
# well within it.
TWINS_PAIR_WAIT_S = 1.0
# ready-before-synced: how long the restarted extender's list of pods takes (a cluster
# with many pods), while it already serves from the nodes alone.
READY_BEFORE_SYNCED_LIST_S = 30.0

HELP = variants.FAULT_HELP
EXTENDER_HELP = (
    f"break the extender on purpose, {HELP}: {UNEVEN_SPLIT} writes per-card GiB that are uneven "
    f"but sum to N (first card +1, last card -1, for M > 1); {IGNORE_INTEGER_RULE} accepts N/M "
    f"that is not an integer and gives floor(N/M) GiB per card; {STALE_VIEW} filters and binds "
    "from the informer's view only, ignoring reservations of binds in flight (and waits "
    f"{STALE_VIEW_BIND_DELAY_S:g} s before writing a bind, so a burst's binds overlap); "
    f"{CARDS_ACROSS_NODES} counts free cards across all nodes, so a pod asking M cards fits "
    f"a node that has fewer; {SCHEDULE_NOTHING} turns every GPU pod away with a reason that "
    f"sounds like each restriction; {TWINS_AT_ONCE} binds a pod at once even while a pod with "
    "the same gpu-mem per container waits for its Allocate on the node, so the device plugin "
    f"can serve pods created together each other's cards; {OPEN_TO_STALLS} listens on "
    f"{STALLS_ADDRESS}, waits {STALLS_DEADLINE_S:g} s for a slow client and serves {STALLS_CONNECTIONS} "
    f"connections at once, so a pod can hold it; {FAILED_PODS_HOLD} keeps counting the cards of a pod "
    "that ended Failed, as if only Succeeded pods gave them back; "
    f"{READY_BEFORE_SYNCED} reports Ready and serves filter and bind once it has listed the nodes, "
    f"while its list of pods (the running pods' cards) takes {READY_BEFORE_SYNCED_LIST_S:g} s "
    "(default: no fault)"
)
DEVICE_PLUGIN_HELP = (
    f"break the device plugin on purpose, {HELP}: {NO_ISOLATION} leaves the isolation shim "
    "out of Allocate (no LD_PRELOAD, no GPUSHARE_MEMORY_LIMIT* variables; mock libraries are "
    "still mounted, so nvidia-smi shows the physical card); the shim faults, passed to it in "
    f"{SHIM_FAULT_ENV}: {PER_PROCESS_BUDGET} gives each process of a container its own budget, "
    f"{LEAK_FREES} never credits a free back, {NO_RECLAIM} never gives back the memory of a "
    f"killed process, {UNGUARDED_MANAGED} lets cuMemAllocManaged past the limit, "
    f"{EXACT_FIT_REFUSED} refuses an allocation that fills the share to the byte, "
    f"{SMI_IGNORES_USAGE} makes NVML (nvidia-smi) show the share free whatever the container "
    f"holds, {ORDINAL_CARDS} charges a process's CUDA device N to container card N whatever "
    f"CUDA_VISIBLE_DEVICES says, {LOADER_UNHELD} leaves RTLD_DEEPBIND and dlmopen to the loader, "
    f"{STREAM_CURRENT_CARD} charges a stream-ordered allocation to the current card, not the stream's, "
    f"{CONTEXTS_UNCHARGED} charges CUDA contexts nothing, {VMM_RELEASE_FREES} gives the share of a "
    "cuMemCreate allocation back at cuMemRelease while a mapping still holds it, "
    f"{EXEC_KEEPS_CHARGE} keeps a process's charge after it execs another program (same pid); {SHARED_ACCOUNTING} gives every container of the node one accounting file, so "
    f"pods on a card draw from one budget; {BLIND_TO_HEALTH} never re-reads NVML after start, so a card that "
    f"falls off the bus stays Healthy and advertised; {ISOLATION_FILES_WRITABLE} mounts the container's limits "
    f"and preload list read-write; {IGNORES_XIDS} takes every Xid error NVML reports "
    "for an application's, so a card with a critical Xid stays Healthy and advertised (default: no fault)"
)


DRA_PLUGIN_HELP = (
    f"break the DRA plugin on purpose, {HELP}: {NO_ISOLATION} prepares claims without the isolation "
    "shim (no LD_PRELOAD, no GPUSHARE_MEMORY_LIMIT* variables: the capacity a claim consumed is not "
    f"enforced in the pod); {OVERCOMMIT_CAPACITY} publishes each card's memory capacity "
    f"{OVERCOMMIT_FACTOR}x its size, so the scheduler lets claims' shares over-commit a card; "
    f"{REQUEST_NOT_CONSUMED} gives each container the claim's requested memory rounded down to whole "
    "GiB, not the capacity the allocation consumed (default: no fault)"
)


def overcommitted_gib(memory_gib: int) -> int:
    """Fault ``overcommit-capacity``: the memory a card is published with."""
    return memory_gib * OVERCOMMIT_FACTOR


warn_fault = variants.warn_fault  # the banner each program logs at start


def uneven_split(cards_gib: Mapping[int, int]) -> dict[int, int]:
    """Fault ``uneven-split``: one container's per-card GiB, first card +1 GiB and last
    card -1 GiB (same sum N). A single card is left as is."""
    order = sorted(cards_gib)
    skewed = {card: cards_gib[card] for card in order}
    if len(order) > 1:
        skewed[order[0]] += 1
        skewed[order[-1]] -= 1
    return skewed


def ignore_integer_rule(pod: Mapping[str, Any]) -> ShareRequest:
    """Fault ``ignore-integer-rule``: read the request without the N/M-integer rule;
    each card then gets floor(N/M) GiB (``ShareRequest`` divides with ``//``)."""
    return share_request(pod, integer_rule=False)


def without_isolation(env: Mapping[str, str]) -> dict[str, str]:
    """Fault ``no-isolation``: the container env minus the shim and its limits."""
    return without_shim(dict(env))


def cards_free_across_nodes(free_desc: Mapping[str, list[int]], share_gib: int) -> int:
    """Fault ``cards-across-nodes``: cards with ``share_gib`` free, counted over every
    node (the rule is per node), so M cards "fit" where no node has M."""
    return sum(1 for free in free_desc.values() for f in free if f >= share_gib)


def cards_on_this_node(cards: Any, used: Mapping[int, int], request: ShareRequest) -> int:
    """Fault ``cards-across-nodes``: how many of the pod's cards the bind takes on this
    node (those that fit, at most M); the pod is split, its other cards left "elsewhere"."""
    fitting = sum(1 for c in cards if c.healthy and c.total_gib - used.get(c.index, 0) >= request.per_card_gib)
    return max(1, min(request.count, fitting))


def with_shim_fault(env: Mapping[str, str], fault: str) -> dict[str, str]:
    """Shim faults (``per-process-budget``, ``leak-frees``, ``no-reclaim``,
    ``unguarded-managed``, ``exact-fit-refused``, ``smi-ignores-usage``, ``ordinal-cards``, ``loader-unheld``,
    ``stream-current-card``, ``contexts-uncharged``, ``vmm-release-frees``, ``exec-keeps-charge``): the container env with the fault build of the shim (the
    shipped one has no fault switch) and ``GPUSHARE_SHIM_FAULT``, which it reads at start
    and announces on stderr as ``FAULT INJECTED``."""
    return {**env, contract.ENV_LD_PRELOAD: contract.SHIM_FAULTS_PATH, SHIM_FAULT_ENV: fault}


def shared_accounting(mounts: list[Any], root: str) -> list[Any]:
    """Fault ``shared-accounting``: the container's mounts with its accounting file
    replaced by one file for the whole node, so the processes of every pod on a card
    are counted against each pod's share."""
    from gpushare_stack.deviceplugin.container_files import prepared_usage_file

    shared = Path(root) / SHARED_USAGE_NAME
    if not shared.exists():
        shared.write_bytes(prepared_usage_file())
        shared.chmod(0o666)
    return [
        type(m)(m.container_path, str(shared), m.read_only) if m.container_path == contract.CONTAINER_USAGE_FILE else m
        for m in mounts
    ]


def writable_isolation_files(mounts: list[Any]) -> list[Any]:
    """Fault ``isolation-files-writable``: the container's mounts with its limits file and
    preload list given read-write, so the container's root can write what its shim reads."""
    writable = (contract.CONTAINER_LIMITS_FILE, contract.CONTAINER_PRELOAD_FILE)
    return [type(m)(m.container_path, m.host_path, False) if m.container_path in writable else m for m in mounts]


def ignores_xid(xid: int) -> bool:
    """Fault ``ignores-xids``: every Xid error counts as an application's, so no card
    ever leaves what the node advertises for one (the watcher still logs it)."""
    logging.getLogger(__name__).warning("FAULT INJECTED: ignores-xids: Xid %d taken for an application error", xid)
    return False


def nothing_fits(count: int, share_gib: int) -> str:
    """Fault ``schedule-nothing``: the reason every node gives every GPU pod. It names
    every rule (gpu-mem per card, N/M, not enough cards), so only a check that first
    shows a fitting pod placed can tell this stack from one that enforces the rules."""
    return (
        f"not enough cards with the gpu-mem asked per card "
        f"(N/M = {share_gib} GiB on each of {count} card(s)): FAULT INJECTED schedule-nothing"
    )


def stale_view_delay(log: logging.Logger, pod: str) -> None:
    """Fault ``stale-view``: hold a bind between choosing its cards and writing them."""
    log.warning(
        "FAULT INJECTED: stale-view: binding %s in %.1f s without reserving its cards", pod, STALE_VIEW_BIND_DELAY_S
    )
    time.sleep(STALE_VIEW_BIND_DELAY_S)


# ---- the faults as mixins over a flavor's policy ---------------------------------------
# Each overrides the one seam its fault breaks and defers to the flavor for the rest.
class UnevenSplit:
    def split(self, containers: dict[int, dict[int, int]]) -> dict[int, dict[int, int]]:
        return {c: uneven_split(cards) for c, cards in super().split(containers).items()}  # type: ignore[misc]


class IgnoreIntegerRule:
    def share_request(self, pod: Mapping[str, Any]) -> ShareRequest:
        return ignore_integer_rule(pod)


class UnheldBinds:
    """Binds run at once, each on its own view of the node: nothing waits for a twin."""

    fault = TWINS_AT_ONCE

    def lock_node(self, core: Any, pod: Mapping[str, Any], node: str) -> None:
        meta = pod.get("metadata") or {}
        logging.getLogger(__name__).warning(
            "FAULT INJECTED: %s: binding %s/%s without waiting for its twins",
            self.fault,
            meta.get("namespace"),
            meta.get("name"),
        )


class BindsAtOnce(UnheldBinds):
    """Twins are bound at once (``twins-at-once``), a later-assumed twin's Binding
    before an earlier one's (``twin_pairs.py``), so the kubelet admits the later twin
    while the earlier one is bound, and the device plugin serves it the wrong cards."""

    twin_wait_s = TWINS_PAIR_WAIT_S

    def _pairs(self) -> TwinPairs:
        return self.__dict__.setdefault("_twin_pairs", TwinPairs(self.twin_wait_s))

    def lock_node(self, core: Any, pod: Mapping[str, Any], node: str) -> None:
        super().lock_node(core, pod, node)
        meta = pod.get("metadata") or {}
        self._pairs().begin((node, container_sizes(pod)), f"{meta.get('namespace')}/{meta.get('name')}")

    def before_writing_bind(self, pod: str) -> None:
        self._pairs().assumed()

    def before_binding(self, pod: str) -> None:
        self._pairs().before_binding()

    def bind_finished(self, node: str) -> None:
        self._pairs().finished()
        super().bind_finished(node)  # type: ignore[misc]


class StaleView(UnheldBinds):
    fault = STALE_VIEW
    reserves_assumed = False

    def before_writing_bind(self, pod: str) -> None:
        stale_view_delay(logging.getLogger(__name__), pod)


class ReadyBeforeSynced:
    """Serves once the nodes are listed, before the pods are (``ready-before-synced``):
    a restarted extender books cards that running pods hold."""

    synced_needs = ("nodes",)

    def before_listing(self, kind: str) -> None:
        if kind == "pods":
            logging.getLogger(__name__).warning(
                "FAULT INJECTED: %s: listing pods in %.0f s, serving meanwhile",
                READY_BEFORE_SYNCED,
                READY_BEFORE_SYNCED_LIST_S,
            )
            time.sleep(READY_BEFORE_SYNCED_LIST_S)


class CardsAcrossNodes:
    def cards_free_anywhere(self, free_desc: Mapping[str, list[int]], per_card: int) -> int:
        return cards_free_across_nodes(free_desc, per_card)

    def cards_to_take(self, cards: Any, used: Mapping[int, int], req: ShareRequest) -> int | None:
        # the rest of the pod's cards are "on other nodes"; take what this node has
        return cards_on_this_node(cards, used, req)


class ScheduleNothing:
    def refusal_for_every_node(self, count: int, per_card: int) -> str | None:
        return nothing_fits(count, per_card)


class OpenToStalls:
    def listening(self, address: str, deadline_s: float, max_connections: int) -> tuple[str, float, int]:
        return STALLS_ADDRESS, STALLS_DEADLINE_S, STALLS_CONNECTIONS


class FailedPodsHold:
    def gives_cards_back(self, pod: Mapping[str, Any]) -> bool:
        failed = (pod.get("status") or {}).get("phase") == "Failed"
        return super().gives_cards_back(pod) and not failed  # type: ignore[misc]


class NoIsolation:
    def container_environment(self, plugin: Any, match: Any) -> tuple[dict[str, str], list[Any]]:
        env, mounts = self.base_environment(plugin, match)  # type: ignore[attr-defined]
        return without_isolation(env), mounts


class ShimFault:
    shim_fault = ""  # set per fault by ``mixin``

    def shim_environment(self, env: dict[str, str]) -> dict[str, str]:
        return with_shim_fault(super().shim_environment(env), self.shim_fault)  # type: ignore[misc]


class SharedAccounting:
    def accounting_files(self, files: list[Any], containers_dir: str) -> list[Any]:
        return shared_accounting(files, containers_dir)


class IsolationFilesWritable:
    def accounting_files(self, files: list[Any], containers_dir: str) -> list[Any]:
        return writable_isolation_files(super().accounting_files(files, containers_dir))  # type: ignore[misc]


class BlindToHealth:
    watches_health = False


class IgnoresXids:
    def critical_xid(self, xid: int) -> bool:
        return ignores_xid(xid)


class DraNoIsolation:
    isolation = False


class OvercommitCapacity:
    def capacity_gib(self) -> Any:
        return lambda card: overcommitted_gib(card.memory_gib)


class RequestNotConsumed:
    """Sizes each share from the claim's request, whole GiB rounded down, never from
    the allocation's consumedCapacity (a driver written before request policies)."""

    def sized_shares(self, claim: Mapping[str, Any], shares: Any) -> Any:
        from gpushare_stack.dra.shares import GIB, quantity_bytes

        asked = {
            str(r.get("name")): ((r.get("exactly") or {}).get("capacity") or {}).get("requests") or {}
            for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
        }
        sized = []
        for share in shares:
            memory = asked.get(share.request, {}).get("memory")
            gib = quantity_bytes(memory, f"request {share.request}") // GIB if memory else share.memory_gib
            sized.append(dataclasses.replace(share, memory_gib=max(gib, 1)))
        return sized


EXTENDER_MIXINS: dict[str, type] = {
    UNEVEN_SPLIT: UnevenSplit,
    IGNORE_INTEGER_RULE: IgnoreIntegerRule,
    STALE_VIEW: StaleView,
    CARDS_ACROSS_NODES: CardsAcrossNodes,
    SCHEDULE_NOTHING: ScheduleNothing,
    TWINS_AT_ONCE: BindsAtOnce,
    OPEN_TO_STALLS: OpenToStalls,
    FAILED_PODS_HOLD: FailedPodsHold,
    READY_BEFORE_SYNCED: ReadyBeforeSynced,
}
DEVICE_PLUGIN_MIXINS: dict[str, type] = {
    NO_ISOLATION: NoIsolation,
    SHARED_ACCOUNTING: SharedAccounting,
    BLIND_TO_HEALTH: BlindToHealth,
    ISOLATION_FILES_WRITABLE: IsolationFilesWritable,
    IGNORES_XIDS: IgnoresXids,
    **{name: type(f"ShimFault[{name}]", (ShimFault,), {"shim_fault": name}) for name in SHIM_FAULTS},
}
DRA_PLUGIN_MIXINS: dict[str, type] = {
    NO_ISOLATION: DraNoIsolation,
    OVERCOMMIT_CAPACITY: OvercommitCapacity,
    REQUEST_NOT_CONSUMED: RequestNotConsumed,
}
