"""How much of a share a conforming stack may keep from a process, and why.

The seed promises N/M GiB on each card; it does not say who pays for the CUDA context.
On a real card a process's context takes about 300 to 500 MiB (more on large cards and
with lazy loading off), and isolation layers differ: HAMi's library charges it to the
share, the reference shim and ACK's cGPU do not. So "the share works" is judged from
what the pod itself is told: a new process's ``cuMemGetInfo`` free memory on the card
must be the share (nvidia-smi's total) less at most ``CONTEXT_MIB``, and allocating
what it is told is free, less ``ALLOC_MARGIN_MIB``, must succeed. One MiB past the
total shown must still fail. docs/suite.md ("Tolerances") says the same for users.
"""

from __future__ import annotations

from gpushare_conformance.allocation import Verdict

# The most of a share one process's CUDA context may take (a real card's context, with room).
CONTEXT_MIB = 512
# Kept below what a process is told is free: real drivers map memory in 2 MiB pages and
# keep a little for the allocator's own bookkeeping.
ALLOC_MARGIN_MIB = 64


def share_usable(check: str, free_mib: int, shown_mib: int, processes: int = 1) -> Verdict:
    """A process is told at most the share shown, and no less than the share less the
    contexts of ``processes`` processes using the card (its own included)."""
    low = shown_mib - CONTEXT_MIB * processes
    expected = f"{low}..{shown_mib} MiB"
    if free_mib > shown_mib:
        detail = f"told {free_mib} MiB free, more than the {shown_mib} MiB the card shows"
        return Verdict(check, expected, f"{free_mib} MiB", False, detail)
    if free_mib < low:
        detail = (
            f"told {free_mib} MiB free of a {shown_mib} MiB share: {shown_mib - free_mib} MiB kept back, more "
            f"than {processes} CUDA context(s) of up to {CONTEXT_MIB} MiB"
        )
        return Verdict(check, expected, f"{free_mib} MiB", False, detail)
    detail = f"told {free_mib} MiB free of a {shown_mib} MiB share ({shown_mib - free_mib} MiB for contexts)"
    return Verdict(check, expected, f"{free_mib} MiB", True, detail)


def within_told(free_mib: int) -> int:
    """What a check allocates to show the share works: what it was told, less the margin."""
    return max(free_mib - ALLOC_MARGIN_MIB, 1)
