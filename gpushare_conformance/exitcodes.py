"""The exit statuses of ``gpushare-conformance run`` (and of the suite's pytest session).

``run`` maps pytest's exit status and the verdicts onto these, so a script can tell a
stack that failed a rule from a cluster that could not be judged:

- 0 ``CONFORMS``: every rule that was judged passed;
- 1 ``RULE_FAILED``: a rule of the seed failed (a check found the stack at fault);
- 2 ``USAGE``: a bad option or combination, or no check selected; nothing ran;
- 3 ``INFRASTRUCTURE``: the cluster could not be judged (unreachable, an unusable
  kubeconfig, the stack not ready, no GPU node advertising the stack's resources);
  nothing is a verdict on the stack; also when checks ran but none could judge its
  rule (every exec into the stack's pods refused, say);
- 4 ``INTERNAL``: the suite itself crashed (pytest's internal error);
- 130 ``INTERRUPTED``: stopped by Ctrl-C or SIGTERM.

The suite's pytest session ends with ``INFRASTRUCTURE`` too after an infrastructure
error (pytest's own 3, an internal error, is told apart by ``run`` from the verdicts).
"""

from __future__ import annotations

CONFORMS = 0
RULE_FAILED = 1
USAGE = 2
INFRASTRUCTURE = 3
INTERNAL = 4
INTERRUPTED = 130

# For `run --help` and the README.
EPILOG = """exit status:
  0    conforms: every rule that was judged passed
  1    a rule of the seed failed
  2    usage error: a bad option, or no check selected; nothing ran
  3    infrastructure error: the cluster could not be judged (unreachable, unusable
       kubeconfig, stack not ready, no GPU node advertising the stack's resources,
       or no rule could be judged); one message, no verdict
  4    internal error of the suite (pytest's internal error)
  130  interrupted (Ctrl-C, SIGTERM)"""

# pytest's ExitCode values (pytest.ExitCode), spelled out so this module imports nothing.
_PYTEST = {0: CONFORMS, 1: RULE_FAILED, 2: INTERRUPTED, 3: INTERNAL, 4: USAGE, 5: USAGE}


def from_pytest(status: int, infrastructure: bool = False) -> int:
    """``run``'s status for pytest's exit ``status``; ``infrastructure``: the verdicts
    name an infrastructure error (then nothing was judged, whatever pytest said)."""
    if infrastructure:
        return INFRASTRUCTURE
    return _PYTEST.get(status, INTERNAL)
