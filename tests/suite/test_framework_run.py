"""A run's state and its end, driven without a pytest session."""

from __future__ import annotations

import re

from gpushare_conformance.fixtures.framework import run
from gpushare_conformance.fixtures.options import SuiteOptions


def _state(tmp_path, monkeypatch) -> run.SuiteState:
    monkeypatch.setattr(run.SuiteState, "run_dir", property(lambda self: tmp_path / "run"))
    return run.SuiteState(SuiteOptions.from_values({}), None)


def test_each_checks_namespace_counts_up_in_the_process(tmp_path, monkeypatch):
    state = _state(tmp_path, monkeypatch)
    first, second = state.next_namespace("a.py::test_one"), state.next_namespace("a.py::test_one")
    assert re.fullmatch(r"gs-test-one-1-[0-9a-f]{4}", first) and re.fullmatch(r"gs-test-one-2-[0-9a-f]{4}", second)


def test_a_worker_and_a_run_without_a_cluster_sweep_nothing(tmp_path, monkeypatch):
    state = _state(tmp_path, monkeypatch)
    assert run.sweep_run(state, print) == []
    state.kube, state.worker = object(), "gw0"
    assert run.sweep_run(state, print) == []  # the controller sweeps


def test_the_end_of_a_run_without_a_cluster_removes_its_directory(tmp_path, monkeypatch):
    state = _state(tmp_path, monkeypatch)
    (state.shared_dir() / "ledger.json").write_text("{}")
    run.finish_run(state, print)
    assert not state.run_dir.exists()


def test_a_worker_leaves_the_run_directory_to_the_controller(tmp_path, monkeypatch):
    state = _state(tmp_path, monkeypatch)
    state.worker = "gw1"
    state.shared_dir()
    run.finish_run(state, print)
    assert state.run_dir.exists()
