"""Which cluster of the test command runs each mutation case (tests/mutation).

The test command runs the cases in two shares, each on the cluster its stream already
holds: the local cluster's stream runs ``ON_LOCAL`` on the reference stack, before it
switches to the DRA driver, and the kind cluster's stream runs every other case after
the whole suite on kind, in one child with ``--gpushare-cluster kind``
(tests/kind/test_kind_suite.py; tests/conftest.py deselects them from the test
command). Named on the command line (``pytest tests/mutation``) every case runs on the
session's cluster.

The split is about time, not proof: each case is caught on whichever cluster runs it
(``cards-across-nodes`` needs two GPU nodes, so kind runs it). ``ON_LOCAL`` is chosen so
that the streams end together (docs/suite.md, "Where the test command's time goes"):
with every case on kind its stream was the wall (ci71: 1259 s against the local
stream's 919). A new case runs on kind.
"""

from __future__ import annotations

from pathlib import Path

FAULT_OVERLAYS = Path(__file__).resolve().parents[1] / "manifests" / "overlays" / "faults"
MUTATION = "tests/mutation/test_checks_catch_broken_stacks.py"
CASE_TEST = "test_checks_fail_on_a_stack_with_the_fault"

# The faults (manifests/overlays/faults/<name>) the local cluster's stream runs.
# About 110 s of the kind stream's 1140 in ci73 (cold): open-to-stalls 45 s (its attack
# holds the extender's connections), ignores-xids 44, uneven-split 20.
ON_LOCAL = frozenset({"open-to-stalls", "ignores-xids", "uneven-split"})


def mutation_faults() -> list[str]:
    """Every fault overlay a mutation case deploys, sorted: all but the DRA driver's
    (``dra-*``, tests/dra runs those)."""
    return sorted(p.name for p in FAULT_OVERLAYS.iterdir() if p.is_dir() and not p.name.startswith("dra-"))


def case_of(nodeid: str) -> str | None:
    """The fault a mutation case's node id names (None: not a mutation case)."""
    path, _, rest = nodeid.partition("::")
    if path != MUTATION or not rest.startswith(f"{CASE_TEST}[") or not rest.endswith("]"):
        return None
    return rest[len(CASE_TEST) + 1 : -1]


def local_share() -> list[str]:
    """The node ids of the cases the local cluster's stream runs, sorted (the kind
    cluster's child deselects them)."""
    return [f"{MUTATION}::{CASE_TEST}[{fault}]" for fault in sorted(ON_LOCAL)]
