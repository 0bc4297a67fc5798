"""The placement ledger: grants whole cards on one node, never more than the node has,
runs exclusive checks alone without starving them, and forgets holders that died."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import pytest

from gpushare_conformance.fixtures.framework.placement import ALL, Ledger, Need
from gpushare_conformance.fixtures.framework.wait import WaitTimeout


def test_grants_cards_until_the_node_is_full(tmp_path):
    ledger = Ledger(tmp_path, {"gpu-a": 4})
    first = ledger.try_acquire("seed", Need(cards=2))
    second = ledger.try_acquire("grid", Need(cards=2))
    assert (first.node, first.cards, second.node, second.cards) == ("gpu-a", 2, "gpu-a", 2)
    assert ledger.try_acquire("limitation", Need(cards=1)) is None
    assert ledger.try_acquire("restriction", Need(cards=0)) is not None, "a check holding nothing always fits"
    ledger.release("seed")
    assert ledger.try_acquire("limitation", Need(cards=1)).cards == 1


def test_all_cards_needs_a_whole_free_node_and_picks_the_fullest_that_fits(tmp_path):
    ledger = Ledger(tmp_path, {"big": 4, "small": 2})
    assert ledger.try_acquire("one", Need(cards=1)).node == "small"
    whole = ledger.try_acquire("all", Need(cards=ALL))
    assert (whole.node, whole.cards) == ("big", 4)
    assert ledger.try_acquire("all-again", Need(cards=ALL)) is None


def test_exclusive_waits_for_everyone_and_holds_new_grants_back(tmp_path):
    ledger = Ledger(tmp_path, {"gpu-a": 4})
    assert ledger.try_acquire("small", Need(cards=1)) is not None
    assert ledger.try_acquire("restart", Need(exclusive=True)) is None
    assert ledger.try_acquire("later", Need(cards=1)) is None, "an exclusive check is waiting: no new grants"
    ledger.release("small")
    assert ledger.try_acquire("restart", Need(exclusive=True)).exclusive
    assert ledger.try_acquire("later", Need(cards=0)) is None, "nothing runs beside an exclusive check"
    ledger.release("restart")
    assert ledger.try_acquire("later", Need(cards=1)) is not None


def test_a_request_for_several_cards_is_not_overtaken_by_single_cards(tmp_path):
    ledger = Ledger(tmp_path, {"gpu-a": 4})
    assert ledger.try_acquire("one", Need(cards=1)) is not None
    assert ledger.try_acquire("two-pods", Need(cards=ALL)) is None
    assert ledger.try_acquire("grid-4", Need(cards=4)) is None
    assert ledger.try_acquire("later", Need(cards=1)) is None, "a whole-node check queues: no new card grants"
    assert ledger.try_acquire("reject", Need(cards=0)) is not None, "a check holding no card still runs"
    ledger.release("one")
    assert ledger.try_acquire("grid-4", Need(cards=4)) is None, "the older queued request goes first"
    assert ledger.try_acquire("two-pods", Need(cards=ALL)).cards == 4
    ledger.release("two-pods")
    assert ledger.try_acquire("later", Need(cards=1)) is None, "grid-4 still queued before it"
    assert ledger.try_acquire("grid-4", Need(cards=4)).cards == 4
    ledger.release("grid-4")
    assert ledger.try_acquire("later", Need(cards=1)) is not None


def test_a_dead_holder_is_forgotten(tmp_path):
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "from gpushare_conformance.fixtures.framework.placement import Ledger, Need;"
                f"Ledger({str(tmp_path)!r}, {{'gpu-a': 2}}).try_acquire('crashed', Need(cards=2))"
            ),
        ],
        check=True,
    )
    assert child.returncode == 0
    assert Ledger(tmp_path, {"gpu-a": 2}).try_acquire("next", Need(cards=2)) is not None


def test_acquire_times_out_naming_who_holds_the_cards(tmp_path):
    ledger = Ledger(tmp_path, {"gpu-a": 2})
    ledger.try_acquire("holder", Need(cards=2))
    with pytest.raises(WaitTimeout, match=r"waiter to get 1 card\(s\) on one node.*holder \(2 on gpu-a\)"):
        ledger.acquire("waiter", Need(cards=1), timeout=0.3)


def test_a_queued_wait_names_the_requests_queued_before_it(tmp_path):
    ledger = Ledger(tmp_path, {"gpu-a": 2})
    ledger.try_acquire("holder", Need(cards=1))
    assert ledger.try_acquire("first", Need(cards=ALL)) is None
    with pytest.raises(WaitTimeout, match=r"holder \(1 on gpu-a\); queued before it: first"):
        ledger.acquire("second", Need(cards=ALL), timeout=0.3)
    assert "second" not in ledger._read()["waiting_cards"], "a request that gave up leaves the queue"


def _hammer(directory: str, name: str, rounds: int, out) -> None:
    ledger = Ledger(directory, {"gpu-a": 4})
    peak = 0
    for i in range(rounds):
        grant = ledger.acquire(f"{name}-{i}", Need(cards=3 if i % 2 else 2), timeout=60)
        with ledger.lock:
            held = sum(h["cards"] for h in ledger._read()["holders"].values())
        peak = max(peak, held)
        ledger.release(grant.holder)
    out.put(peak)


def test_processes_never_hold_more_cards_than_the_node_has(tmp_path):
    out = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=_hammer, args=(str(tmp_path), f"w{i}", 25, out)) for i in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    peaks = [out.get(timeout=5) for _ in workers]
    assert max(peaks) <= 4, peaks


class _Item:
    """The little of a pytest item ``parallel_rank`` reads: its fixtures and markers."""

    def __init__(self, name: str, *marks: pytest.MarkDecorator, cluster: bool = True) -> None:
        self.name = name
        self.fixturenames = ("cluster", "suite") if cluster else ("tmp_path",)
        self._marks = {m.mark.name: m.mark for m in marks}

    def get_closest_marker(self, name: str):
        return self._marks.get(name)


def test_parallel_order_puts_whole_node_checks_first_and_cluster_wide_ones_last():
    from gpushare_conformance.fixtures.framework.ordering import parallel_rank

    items = [
        _Item("unit", cluster=False),
        _Item("seed", pytest.mark.capacity(cards=2)),
        _Item("restart", pytest.mark.disruptive),
        _Item("reject", pytest.mark.capacity(cards=0)),
        _Item("grid-1", pytest.mark.capacity(cards=1)),
        _Item("two-pods", pytest.mark.capacity(cards=ALL)),
        _Item("undeclared"),
        _Item("grid-4", pytest.mark.capacity(cards=4)),
    ]
    ordered = [i.name for i in sorted(items, key=parallel_rank)]
    assert ordered == ["unit", "reject", "two-pods", "grid-4", "seed", "grid-1", "restart", "undeclared"]
