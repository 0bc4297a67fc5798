"""The order of a run's checks, worked out from stand-in items (no pytest session)."""

from __future__ import annotations

import pytest

from gpushare_conformance.fixtures.framework.ordering import disruptive_last, need_of, parallel_rank, uses_cluster
from gpushare_conformance.fixtures.framework.placement import ALL, Need


class _Item:
    def __init__(self, *marks: pytest.MarkDecorator, cluster: bool = True) -> None:
        self.fixturenames = ("cluster",) if cluster else ("tmp_path",)
        self._marks = {m.mark.name: m.mark for m in marks}

    def get_closest_marker(self, name: str):
        return self._marks.get(name)


def test_only_items_asking_for_the_cluster_are_the_suites():
    assert uses_cluster(_Item()) and not uses_cluster(_Item(cluster=False)) and not uses_cluster(object())


@pytest.mark.parametrize(
    "marks, need",
    [
        ((pytest.mark.capacity(cards=2),), Need(cards=2)),
        ((pytest.mark.capacity(4),), Need(cards=4)),
        ((pytest.mark.capacity(cards=ALL),), Need(cards=ALL)),
        ((pytest.mark.capacity(cards=1, exclusive=True),), Need(cards=1, exclusive=True)),
        ((), Need(exclusive=True)),
        ((pytest.mark.capacity(cards=1), pytest.mark.disruptive), Need(exclusive=True)),
    ],
)
def test_a_check_needs_what_its_capacity_marker_declares_and_undeclared_runs_alone(marks, need):
    assert need_of(_Item(*marks)) == need


def test_disruptive_cluster_checks_sort_last_and_others_keep_their_order():
    items = [_Item(pytest.mark.disruptive), _Item(pytest.mark.disruptive, cluster=False), _Item()]
    assert [disruptive_last(i) for i in items] == [True, False, False]


def test_parallel_rank_groups_whole_node_then_by_cards_then_alone():
    assert parallel_rank(_Item(cluster=False)) == (0, 0)
    assert parallel_rank(_Item(pytest.mark.capacity(cards=0))) == (0, 0)
    assert parallel_rank(_Item(pytest.mark.capacity(cards=ALL))) == (0, 0)
    assert parallel_rank(_Item(pytest.mark.capacity(cards=3))) == (1, -3)
    assert parallel_rank(_Item(pytest.mark.disruptive)) == (2, 0)
