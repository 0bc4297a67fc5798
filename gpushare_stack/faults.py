"""Deliberate faults, off by default, for proving the suite catches a broken stack.

Each switch breaks exactly one rule the conformance checks guard, in one small
function, so ``tests/mutation`` can deploy the broken stack and show which check turns
red. Never use them in production: a pod under a fault gets wrong memory limits, is
scheduled against the rules, or runs without isolation.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from gpushare_stack import contract
from gpushare_stack.request import ShareRequest, share_request

UNEVEN_SPLIT = "uneven-split"
IGNORE_INTEGER_RULE = "ignore-integer-rule"
NO_ISOLATION = "no-isolation"
EXTENDER_FAULTS = (UNEVEN_SPLIT, IGNORE_INTEGER_RULE)
DEVICE_PLUGIN_FAULTS = (NO_ISOLATION,)

HELP = "for proving the suite catches a broken stack; never use in production"
EXTENDER_HELP = (
    f"break the extender on purpose, {HELP}: {UNEVEN_SPLIT} writes per-card GiB that are uneven "
    f"but sum to N (first card +1, last card -1, for M > 1); {IGNORE_INTEGER_RULE} accepts N/M "
    "that is not an integer and gives floor(N/M) GiB per card (default: no fault)"
)
DEVICE_PLUGIN_HELP = (
    f"break the device plugin on purpose, {HELP}: {NO_ISOLATION} leaves the isolation shim "
    "out of Allocate (no LD_PRELOAD, no GPUSHARE_MEMORY_LIMIT* variables; mock libraries are "
    "still mounted, so nvidia-smi shows the physical card) (default: no fault)"
)


def warn_fault(log: logging.Logger, component: str, fault: str | None) -> None:
    """Log a loud WARNING at start when a fault is on, so no one mistakes the stack for a sound one."""
    if fault is None:
        return
    banner = "!" * 72
    log.warning("%s", banner)
    log.warning("FAULT INJECTED: %s runs with --fault %s (%s)", component, fault, HELP)
    log.warning("%s", banner)


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
    return {
        key: value for key, value in env.items()
        if key != contract.ENV_LD_PRELOAD and not key.startswith(contract.ENV_LIMIT_ALL)
    }
