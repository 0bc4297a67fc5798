"""The framework's building blocks: the one wait, named time-outs, verdicts that compute
themselves, the exec status reader, the diagnostics' log window, and the suite's names."""

from __future__ import annotations

import itertools
import time

import pytest

from gpushare_conformance import names
from gpushare_conformance.fixtures.framework import verdicts as v
from gpushare_conformance.fixtures.framework.diagnostics import Window, klog_lines_in
from gpushare_conformance.fixtures.framework.evidence import EvidenceError, ProgramMissing, exec_status
from gpushare_conformance.fixtures.framework.wait import WaitFailed, WaitTimeout, poll_until


def test_poll_until_returns_the_state_that_satisfied_it():
    counter = itertools.count()
    assert poll_until(lambda: next(counter), lambda n: n >= 3, timeout=5, what="three", first_interval=0.01) == 3


def test_poll_until_times_out_naming_what_and_the_last_state():
    with pytest.raises(WaitTimeout, match=r"the pod to run: not reached after 0s; last observed: Pending") as info:
        poll_until(lambda: "Pending", lambda s: s == "Running", timeout=0.2, what="the pod to run", first_interval=0.05)
    assert info.value.state == "Pending"


def test_poll_until_fails_fast_on_a_final_state():
    started = time.monotonic()
    with pytest.raises(WaitFailed, match=r"gave up, it Failed \(last: Failed\)"):
        poll_until(
            lambda: "Failed",
            lambda s: s == "Running",
            final=lambda s: "it Failed" if s == "Failed" else None,
            timeout=30,
            what="the pod to run",
        )
    assert time.monotonic() - started < 1


def test_poll_until_reports_progress_when_the_state_changes():
    states, seen = iter(["a", "a", "b", "done"]), []
    poll_until(
        lambda: next(states), lambda s: s == "done", timeout=5, what="x", progress=seen.append, first_interval=0.01
    )
    assert seen == ["waiting for x: a", "waiting for x: b"]


@pytest.mark.parametrize(
    "verdict, passed, detail",
    [
        (v.equal("n", 2, 2), True, "2"),
        (v.equal("n", 2, 3, "cards"), False, "cards: 3, want 2"),
        (v.within("t", 4309, 4096, 4505, "MiB"), True, "4309 MiB"),
        (v.within("t", 16160, 4096, 4505, "MiB"), False, "16160 MiB, want 4096..4505 MiB"),
        (v.at_most("sum", 4097, 4096, "MiB"), False, "4097 MiB exceeds 4096 MiB"),
        (v.below("b", 4097, 16160, "MiB"), True, "4097 MiB"),
        (v.subset("s", ["1", "2"], {"0", "1", "2", "3"}), True, "['1', '2']"),
        (v.subset("s", ["1", "7"], {"0", "1"}), False, "not allowed: ['7']"),
        (v.distinct("d", ["1", "1"], 2), False, "want 2 distinct"),
        (v.none_of("z", {}), True, "none"),
        (v.none_of("z", {"CUDA_DEVICE_SM_LIMIT": "50"}), False, "CUDA_DEVICE_SM_LIMIT"),
        (v.matches("m", r"integer", "gpushare: N/M must be an integer"), True, "integer"),
        (v.matches("m", r"integer", ""), False, "does not match"),
        (v.exit_ok("e", 1, "boom"), False, "exit 1: boom"),
        (v.fails_with("f", 1, "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY", names.OOM_ERROR), True, "says"),
        (v.fails_with("f", 0, "ok", names.OOM_ERROR), False, "exit 0, does not say"),
    ],
)
def test_verdicts_derive_pass_and_message_from_one_statement(verdict, passed, detail):
    assert verdict.passed is passed
    assert detail in verdict.detail


def test_exec_status_reads_exit_codes_and_names_a_missing_program():
    assert exec_status("status: Success\n", ["true"], "ns/p") == 0
    nonzero = "status: Failure\nreason: NonZeroExitCode\ndetails:\n  causes:\n  - reason: ExitCode\n    message: '3'\n"
    assert exec_status(nonzero, ["false"], "ns/p") == 3
    missing = (
        '{"status":"Failure","message":"Internal error occurred: error executing command in container: failed '
        "to exec in container: OCI runtime exec failed: exec failed: unable to start container process: exec: "
        '\\"nvidia-smi\\": executable file not found in $PATH: unknown","reason":"InternalError"}'
    )
    with pytest.raises(ProgramMissing, match=r"'nvidia-smi' is not in pod gpushare-system/plugin-x"):
        exec_status(missing, ["nvidia-smi", "-L"], "gpushare-system/plugin-x")
    with pytest.raises(EvidenceError, match="ended without an exit status"):
        exec_status("", ["x"], "ns/p")


def test_klog_lines_are_cut_to_the_check_window():
    import datetime as dt

    def at(h: int, m: int, s: int) -> float:
        return dt.datetime(2026, 12, 3, h, m, s, tzinfo=dt.UTC).timestamp()

    log = (
        "I1203 10:00:00.000001 1 a.go:1] before\n"
        "I1203 10:05:00.500000 1 a.go:1] inside\n"
        "  continuation of inside\n"
        "E1203 10:09:00.000000 1 a.go:1] after\n"
    )
    assert klog_lines_in(log, Window(at(10, 4, 0), at(10, 6, 0)), year=2026) == (
        "I1203 10:05:00.500000 1 a.go:1] inside\n  continuation of inside"
    )


def test_suite_names_mirror_the_reference_stack_contract():
    from gpushare_stack import contract

    assert (
        names.GPU_MEM,
        names.GPU_COUNT,
        names.NODE_LABEL,
        names.NODE_CARDS_ANNOTATION,
        names.STACK_NAMESPACE,
        names.EXTENDER_PORT,
        names.STACK_IMAGE,
        names.MOCK_WORKLOAD_IMAGE,
        names.ENV_VISIBLE,
    ) == (
        contract.RESOURCE_MEM,
        contract.RESOURCE_COUNT,
        contract.NODE_LABEL,
        contract.NODE_CARDS_ANNOTATION,
        contract.NAMESPACE,
        contract.EXTENDER_PORT,
        contract.STACK_IMAGE,
        contract.MOCK_WORKLOAD_IMAGE,
        contract.ENV_VISIBLE,
    )
    assert names.SEED_JOB.is_file() and names.DEFAULT_INVENTORY.is_file() and names.MOCK_OVERLAY.is_dir()


def _bare_context(recorded: list):
    from gpushare_conformance.fixtures.framework.context import CheckContext, VerdictSink

    return CheckContext(
        kube=None,
        handle=None,
        options=None,
        profile=None,
        gpus=[],
        namespace="ns",
        test_id="conformance/test_x.py::test_y",
        sink=VerdictSink(),
        record_property=lambda name, value: recorded.append((name, value)),
        progress=lambda _msg: None,
    )


def test_gathering_records_every_verdict_and_fails_at_the_end_naming_each():
    from gpushare_conformance.allocation import check_card_count, check_card_total

    recorded: list = []
    suite = _bare_context(recorded)
    with pytest.raises(AssertionError) as info:
        with suite.gathering():
            suite.expect(check_card_count(1, 2))
            with suite.gathering():  # nested: the outermost one judges
                suite.expect(check_card_total(16160, 4, 16160))
            suite.expect(check_card_count(2, 2))
    assert len(recorded) == 3, "every verdict recorded, also after a failure"
    message = str(info.value)
    assert message.index("card_count: 1 card(s) visible") < message.index("card_total: 16160 MiB")
    # Outside gathering, the first failed verdict stops the check.
    with pytest.raises(AssertionError, match="card_count"):
        suite.expect(check_card_count(1, 2))
    assert len(recorded) == 4
