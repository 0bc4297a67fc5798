"""The registry of the seed's rules knows every check of ``conformance/``, and only those."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpushare_conformance.rules import AREAS, CHECKS, RULES, SEED_URL, Check, check_name, validate

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"


def _checks_in_conformance() -> dict[str, tuple[str, list[str]]]:
    """Check function name -> (file, parameter names of its parametrize marks)."""
    found = {}
    for path in sorted(CONFORMANCE.glob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                params = []
                for deco in node.decorator_list:
                    if isinstance(deco, ast.Call) and ast.unparse(deco.func).endswith("parametrize") and deco.args:
                        names = ast.literal_eval(deco.args[0])
                        params += [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
                found[node.name] = (path.name, params)
    return found


def test_every_check_of_conformance_has_a_registry_entry():
    missing = [f"{file}::{name}" for name, (file, _) in _checks_in_conformance().items() if name not in CHECKS]
    assert not missing, (
        "checks without an entry in gpushare_conformance/rules.py CHECKS (title, area, rules, "
        f"severity): {', '.join(missing)}"
    )


def test_every_registry_entry_names_a_check_that_exists():
    stale = sorted(set(CHECKS) - set(_checks_in_conformance()))
    assert not stale, f"rules.py CHECKS names checks that conformance/ does not have: {', '.join(stale)}"


def test_the_registry_is_consistent():
    assert validate() == []
    assert set(AREAS) == {"seed", "grid", "restrictions", "isolation", "lifecycle", "limitation", "hostile"}
    assert CHECKS["test_seed_job_gets_4gib_on_each_of_2_cards"].severity == "blocker", "the seed check is the blocker"


def test_validate_names_a_bad_entry():
    bad = dict(CHECKS, test_x=Check("X", "nowhere", ("no_such_rule",), "urgent"))
    import gpushare_conformance.rules as rules_module

    original = rules_module.CHECKS
    rules_module.CHECKS = bad
    try:
        problems = validate()
    finally:
        rules_module.CHECKS = original
    assert (
        "check test_x: area 'nowhere' is not one of seed, grid, restrictions, isolation, lifecycle, limitation, hostile"
        in problems
    )
    assert "check test_x: unknown rule 'no_such_rule'" in problems
    assert any("severity 'urgent'" in p for p in problems)


def test_titles_fill_in_every_parameter():
    for name, (file, params) in _checks_in_conformance().items():
        check = CHECKS.get(name)
        if check is None:
            continue
        title = check.title_for({p: "VALUE" for p in params})
        assert "{" not in title, f"{file}::{name}: title {check.title!r} names a parameter the check lacks"
        assert title[0].isupper(), f"{file}::{name}: title {title!r} should read like a sentence"


@pytest.mark.parametrize(
    ("nodeid", "name"),
    [
        (
            "conformance/test_grid.py::test_n_gib_over_m_cards_gives_n_over_m_on_each_card[3GiBx2]",
            "test_n_gib_over_m_cards_gives_n_over_m_on_each_card",
        ),
        ("test_seed.py::test_seed_job_gets_4gib_on_each_of_2_cards", "test_seed_job_gets_4gib_on_each_of_2_cards"),
        (
            "tests/t.py::test_ids[conformance/test_grid.py::test_n_gib_over_m_cards_gives_n_over_m_on_each_card]",
            "test_ids",
        ),
    ],
    ids=["parametrized", "plain", "parameter-holding-a-node-id"],
)
def test_check_name_of_a_node_id(nodeid, name):
    assert check_name(nodeid) == name


def test_a_title_shows_none_for_a_missing_label():
    title = CHECKS["test_n_gib_over_m_cards_gives_n_over_m_on_each_card"].title_for({"per_card": 2, "cards": None})
    assert title == "A pod asking 2 GiB on each card, gpu-count none, gets it on each card"


def test_rules_link_to_their_seed_section():
    for rule in RULES.values():
        assert rule.link.startswith(SEED_URL + "#:~:text="), rule.id
        assert " " not in rule.link
