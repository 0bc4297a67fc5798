"""The verdict at a glance: one line per rule of the seed, PASS/FAIL/SKIP/INFO, the key
figure in words, and on failure where the evidence is.

Built from what a run wrote (``report.VerdictFile``: verdict records, each check's
outcome) and the registry (``rules.py``), so ``pytest``'s terminal summary and
``gpushare-conformance run`` print the same lines. Fits one screen: one line per rule,
one more per failed rule for its evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpushare_conformance.report import CheckOutcome, VerdictFile, VerdictRecord
from gpushare_conformance.rules import CHECKS, RULES, Rule, check_name

PASS, FAIL, SKIP, INFO, NOT_RUN, NA = "PASS", "FAIL", "SKIP", "INFO", "----", "N/A"
# An attack beyond what the stack's kind of layer can hold got through (docs/threat-model.md):
# shown with its figure, never as PASS, and not counted as a failure of the seed's rules.
OPEN = "OPEN"
# How an infrastructure error (fixtures/providers/base.py) reads in a check's outcome.
INFRASTRUCTURE = "InfrastructureError"
# How an error collecting evidence (an exec the API refused: fixtures/framework/evidence.py)
# reads in a check's outcome: the check could not judge, the stack is not at fault for it.
EVIDENCE_UNAVAILABLE = "EvidenceUnavailable"
NOT_JUDGED = "not judged: "
STYLES = {PASS: "green", FAIL: "bold red", OPEN: "yellow", SKIP: "yellow", INFO: "cyan", NOT_RUN: "dim", NA: "dim"}
_RANK = {FAIL: 0, OPEN: 1, PASS: 2, INFO: 2, NA: 3, SKIP: 4, NOT_RUN: 5}


@dataclass(frozen=True)
class RuleLine:
    rule: Rule
    status: str
    figure: str
    checks: int = 0  # how many checks of this rule ran
    evidence: str = ""  # on FAIL: the check and where its evidence is
    known_gap: bool = False  # the stack's profile says it does not meet this rule

    @property
    def shown_figure(self) -> str:
        """The figure, said to be a known gap where the profile declares one (a known
        gap that passes is worth a look: the profile may be out of date)."""
        if not self.known_gap or self.status not in (PASS, FAIL):
            return self.figure
        return f"(known gap{', yet it passed' if self.status == PASS else ''}) {self.figure}"


def _card_figure(records: list[VerdictRecord], test_records: list[VerdictRecord]) -> str:
    totals = [r for r in records if r.base_check == "card_total"]
    counts = [r.observed for r in test_records if r.base_check == "card_count"]
    seen = sorted({r.observed for r in totals}, key=lambda v: (len(v), v))
    cards = counts[0] if counts else str(len(totals))
    failed = next((r for r in totals if not r.passed), totals[0])
    return f"{cards} card{'' if cards == '1' else 's'} x {'/'.join(seen)} MiB, want {failed.expected}"


def _figure(records: list[VerdictRecord], test_records: list[VerdictRecord], failed: bool) -> str:
    if any(r.base_check == "card_total" for r in records):
        return _card_figure(records, test_records)
    shown = next((r for r in records if not r.passed), None) if failed else None
    shown = shown or next((r for r in records if r.kind == "info"), None) or records[0]
    if shown.kind == "info":
        return shown.observed
    return shown.detail or f"{shown.observed}, want {shown.expected}"


def _evidence(nodeid: str, outcome: CheckOutcome) -> str:
    where = ", ".join(outcome.evidence) or "the pytest report section 'gpushare diagnostics'"
    return f"{where} (of {nodeid.rsplit('/', 1)[-1]})"


def _judge(rule: Rule, nodeid: str, outcome: CheckOutcome, records: list[VerdictRecord]) -> tuple[str, str]:
    """The rule's status in one check, and its figure."""
    judged = [r for r in records if r.kind not in ("not_judged", "not_applicable")]
    own = [r for r in judged if not rule.verdicts or r.base_check in rule.verdicts]
    if any(not r.passed for r in own if r.kind != "open"):
        return FAIL, _figure([r for r in own if r.kind != "open"], records, failed=True)
    if any(not r.passed for r in own):
        return OPEN, f"{_figure(own, records, failed=True)} (beyond an interposition library: docs/threat-model.md)"
    unjudged = next((r for r in records if r.kind == "not_judged"), None)
    if unjudged is not None:
        return NOT_RUN, f"{NOT_JUDGED}{unjudged.detail or unjudged.observed}"
    if outcome.outcome == "skipped":
        return SKIP, f"skipped: {outcome.reason}"
    if outcome.outcome == "error" and INFRASTRUCTURE in outcome.reason:
        # The cluster could not be judged (no GPU node, a plugin advertising 0): not the stack's verdict.
        return NOT_RUN, f"{NOT_JUDGED}{outcome.reason}"
    if outcome.outcome in ("failed", "error") and EVIDENCE_UNAVAILABLE in outcome.reason:
        # The suite could not gather the evidence (the API refused an exec): an error of
        # the check, named with the pod and the API's answer, not a verdict on the stack.
        said = outcome.reason.split(f"{EVIDENCE_UNAVAILABLE}: ", 1)[-1]
        return NOT_RUN, f"{NOT_JUDGED}error collecting evidence: {said}"
    if outcome.outcome in ("failed", "error"):
        stopped = next((r for r in judged if not r.passed), None)
        if stopped is None:
            return FAIL, f"{outcome.outcome}: {outcome.reason}"
        if not own:
            # The check's premise failed (e.g. no budget to share on a stack that does
            # not isolate): the rule is not shown to hold, and the premise is the evidence.
            return FAIL, f"not shown: the check stopped at {_figure([stopped], records, failed=True)}"
    moot = next((r for r in records if r.kind == "not_applicable"), None)
    if moot is not None and not own:
        return NA, moot.detail or moot.observed
    if not own:
        return (INFO if rule.kind == "info" else PASS), f"{check_name(nodeid)} passed"
    # The rule's first-listed verdict is its key figure (the refusal, not its control).
    rank = {name: i for i, name in enumerate(rule.verdicts)}
    own = sorted(own, key=lambda r: rank.get(r.base_check, len(rank)))
    return (INFO if rule.kind == "info" else PASS), _figure(own, records, failed=False)


def nothing_judged(lines: list[RuleLine]) -> bool:
    """Whether no rule was judged at all (every line not judged, skipped or not run),
    though checks ran: the run says so and exits as an infrastructure error."""
    return bool(lines) and all(line.status in (SKIP, NOT_RUN) for line in lines)


def infrastructure_error(result: VerdictFile) -> str | None:
    """The first infrastructure error a check ended with (the cluster could not be
    judged), without the exception's name; None when there was none."""
    for outcome in result.outcomes.values():
        if outcome.outcome == "error" and INFRASTRUCTURE in outcome.reason:
            return outcome.reason.split(f"{INFRASTRUCTURE}: ", 1)[-1]
    return None


def known_gaps(result: VerdictFile) -> frozenset[str]:
    """The rules the run's stack profile declares as known gaps (the ``known_gaps`` fact)."""
    return frozenset(g for g in result.facts.get("known_gaps", "").split(",") if g)


def build_summary(result: VerdictFile) -> list[RuleLine]:
    """One line per rule of the registry, in registry order."""
    gaps = known_gaps(result)
    by_test: dict[str, list[VerdictRecord]] = {}
    for r in result.records:
        by_test.setdefault(r.test, []).append(r)
    order = {name: i for i, name in enumerate(CHECKS)}
    lines = []
    for rule in RULES.values():
        judged = []
        for nodeid, outcome in result.outcomes.items():
            check = CHECKS.get(check_name(nodeid))
            if check is None or rule.id not in check.rules:
                continue
            status, figure = _judge(rule, nodeid, outcome, by_test.get(nodeid, []))
            judged.append((_RANK[status], order[check_name(nodeid)], nodeid, status, figure))
        if not judged:
            lines.append(RuleLine(rule, NOT_RUN, "no check ran"))
            continue
        judged.sort()
        _, _, nodeid, status, figure = judged[0]
        if status != FAIL:
            # A rule whose deciding check could not run is not shown to hold by the others.
            ran = {check_name(n): (st, fig) for _, _, n, st, fig in judged}
            for name in rule.deciding:
                st, fig = ran.get(name, (NOT_RUN, "it did not run"))
                if st in (SKIP, NOT_RUN):
                    status = NOT_RUN
                    figure = f"{NOT_JUDGED}{name} decides it, and {fig.removeprefix(NOT_JUDGED)}"
                    break
        evidence = _evidence(nodeid, result.outcomes[nodeid]) if status == FAIL else ""
        lines.append(RuleLine(rule, status, figure, len(judged), evidence, rule.id in gaps))
    return lines


def conformance_line(lines: list[RuleLine]) -> str:
    """The last line of the table: does the stack conform to the seed, yes or no."""
    failed = [line for line in lines if line.status == FAIL]
    unjudged = [line for line in lines if line.status in (SKIP, NOT_RUN)]
    infrastructure = next((line.figure for line in lines if INFRASTRUCTURE in line.figure), None)
    if infrastructure and not failed:
        return f"conforms to the seed: not judged ({infrastructure.removeprefix('not judged: ')})"
    if not failed and not any(line.status in (PASS, OPEN) for line in lines):
        return "conforms to the seed: not judged (no rule was checked)"
    if failed:
        gaps = sum(1 for line in failed if line.known_gap)
        known = f", {gaps} of them known gaps" if gaps else ""
        return f"conforms to the seed: no ({len(failed)} rule{'s' if len(failed) != 1 else ''} failed{known})"
    if unjudged:
        return (
            f"conforms to the seed: yes, on what ran ({len(unjudged)} rule{'s' if len(unjudged) != 1 else ''} "
            f"not judged here: {', '.join(line.rule.words for line in unjudged)})"
        )
    moot = [line for line in lines if line.status == NA]
    opened = [line for line in lines if line.status == OPEN]
    beyond = (
        f"; open beyond an interposition library: {', '.join(line.rule.words for line in opened)}" if opened else ""
    )
    if moot:
        return (
            f"conforms to the seed: yes (every rule that applies passed; "
            f"not applicable: {', '.join(line.rule.words for line in moot)}{beyond})"
        )
    if opened:
        return f"conforms to the seed: yes (every rule an interposition library can hold passed{beyond})"
    return "conforms to the seed: yes (every rule passed)"


def _cut(text: str, width: int | None) -> str:
    """``text`` on one line, cut to ``width`` with an ellipsis; ``None``: whole."""
    text = " ".join(str(text).split())
    return text if width is None or len(text) <= width else text[: max(width - 1, 0)] + "…"


def headline(result: VerdictFile, lines: list[RuleLine]) -> str:
    counts = {s: sum(1 for line in lines if line.status == s) for s in (PASS, FAIL, OPEN, NA, SKIP, INFO)}
    facts = result.facts
    where = f"{facts.get('stack', '?')} stack on {facts.get('cluster', '?')} cluster"
    tally = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    unjudged = sum(1 for line in lines if line.status == NOT_RUN and not _no_check_ran(line))
    not_run = sum(1 for line in lines if _no_check_ran(line))
    tail = (f", {unjudged} not judged" if unjudged else "") + (f", {not_run} not run" if not_run else "")
    return f"seed rules ({where}): {tally}{tail}"


def _no_check_ran(line: RuleLine) -> bool:
    return line.status == NOT_RUN and not line.figure.startswith(NOT_JUDGED)


# On a terminal, the rules no check judged take at most this many lines; the rest are
# counted (``--verdicts all`` lists every rule).
NOT_RUN_LINES = 3


def _with_rest_counted(packed: str, rest: int, room: int) -> str:
    """``packed`` rule words, dropping the last ones until "; and K more" fits ``room``."""
    words = packed.split("; ")
    while len(words) > 1 and len("; ".join(words)) + len(f"; and {rest} more") > room:
        words.pop()
        rest += 1
    return "; ".join(words) + f"; and {rest} more"


def _not_run_lines(lines: list[RuleLine], width: int | None) -> list[str]:
    """The rules no check judged, packed together so that a partial run (``-k``, one file)
    still fits a screen; a rule's words are never split across lines."""
    names = [line.rule.words for line in lines if _no_check_ran(line)]
    if not names:
        return []
    prefix, out, current = f"{NOT_RUN}  no check ran: ", [], ""
    for shown, name in enumerate(names):
        candidate = f"{current}; {name}" if current else name
        if current and width is not None and len(prefix) + len(candidate) + 1 > width:
            if len(out) + 1 == NOT_RUN_LINES:
                current = _with_rest_counted(current, len(names) - shown, width - len(prefix))
                break
            out.append(current + ";")
            current = name
        else:
            current = candidate
    out.append(current)
    return [prefix + out[0], *(" " * len(prefix) + rest for rest in out[1:])]


def render_lines(result: VerdictFile, width: int | None = 100, full_list: str = "") -> list[tuple[str, str]]:
    """The summary as (text, style) lines of at most ``width`` characters; style names a
    colour for the status word (the writer decides whether to use it). The rule's words
    are never cut; the figure is, to fit. ``width=None`` (not a terminal: a log, a pipe):
    every line whole."""
    lines = build_summary(result)
    words_width = max(len(line.rule.words) for line in lines)
    out = [(headline(result, lines), "bold")]
    shown = [line for line in lines if not _no_check_ran(line)]
    # The seed's rules for a cooperative workload first, then one per attack class.
    shown.sort(key=lambda line: line.rule.area == "hostile")
    hostile_heading = False
    for line in shown:
        if line.rule.area == "hostile" and not hostile_heading:
            hostile_heading = True
            out.append(("      a hostile workload, one rule per attack class (docs/threat-model.md):", "bold"))
        ran = f" ({line.checks} checks)" if line.checks > 1 else ""
        room = None if width is None else width - 6 - words_width - 2 - len(ran)
        out.append(
            (
                f"{line.status:<4}  {line.rule.words:<{words_width}}  {_cut(line.shown_figure, room)}{ran}".rstrip(),
                STYLES[line.status],
            )
        )
        if line.evidence:
            out.append((_cut(f"      evidence: {line.evidence}", width), STYLES[FAIL]))
    out.extend((text, STYLES[NOT_RUN]) for text in _not_run_lines(lines, width))
    verdict = conformance_line(lines)
    out.append((verdict, STYLES[FAIL] if verdict.startswith("conforms to the seed: no") else STYLES[PASS]))
    if full_list:
        out.append((_cut(full_list, width), ""))
    return out


def render_text(result: VerdictFile, width: int | None = 100, colour: bool = False, full_list: str = "") -> str:
    """The summary as text; the status word (and evidence lines) in colour only if ``colour``."""
    codes = {"green": "32", "bold red": "1;31", "yellow": "33", "cyan": "36", "dim": "2", "bold": "1"}
    out = []
    for text, style in render_lines(result, width, full_list):
        if colour and style:
            # The status word of a rule line; a headline or an evidence line whole.
            cut = len(text) if style == "bold" or text.startswith((" ", "conforms")) else 4
            text = f"\033[{codes[style]}m{text[:cut]}\033[0m{text[cut:]}"
        out.append(text)
    return "\n".join(out)
