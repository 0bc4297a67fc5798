"""The import graph of the project's own Python packages has no circle, and the
shipped stack imports none of its test doubles.

A circle of imports hides which module is the product and which serves it (the
reference stack and the peers' flavors used to import each other), and it makes the
order of imports decide what works. The doubles (``gpushare_doubles``: the peers'
flavors and the deliberate faults) plug into the stack's seams at run time; a static
import of them from ``gpushare_stack`` would ship them in the product again.

Edges are read with ``ast`` from every ``import`` and ``from ... import`` of a module,
at module level and inside functions alike (a deferred import is still a dependency).
``from package import name`` is an edge to ``package.name`` when that is a module of
the tree, else to ``package``. Running a module's parent packages' ``__init__`` is not
counted as an edge: that is how Python finds a module, not what the module uses.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("gpushare_stack", "gpushare_doubles", "gpushare_conformance", "fixtures", "conformance")
SHIPPED = "gpushare_stack"
DOUBLES = "gpushare_doubles"


def module_files(root: Path = REPO, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Every module of ``packages`` under ``root``, by dotted name."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name a (possibly relative) ``from ... import`` names."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """``name`` or its longest prefix that is a module of the tree."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of the tree it imports (anywhere in its body)."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets: set[str] = set()
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, path.name == "__init__.py", node)
                names = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                target = _known(name, modules)
                if target is not None and target != module:
                    targets.add(target)
        graph[module] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative, so a deep graph cannot hit the recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_packages_import_graph_has_no_circle():
    graph = import_graph(module_files())
    assert graph, "no modules found"
    found = circles(graph)
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_shipped_stack_imports_none_of_its_test_doubles():
    graph = import_graph(module_files())
    offending = {
        module: sorted(t for t in targets if t.split(".")[0] == DOUBLES)
        for module, targets in graph.items()
        if module.split(".")[0] == SHIPPED
    }
    offending = {m: t for m, t in offending.items() if t}
    assert not offending, f"{SHIPPED} imports its test doubles: {offending}"
    assert any(m.split(".")[0] == DOUBLES for m in graph), f"{DOUBLES} not found: the test looks in the wrong place"


def test_the_circle_finder_sees_a_circle_through_a_deferred_import(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def later():\n    from . import c\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    (pkg / "d.py").write_text("from pkg.a import thing\n")
    graph = import_graph(module_files(tmp_path, ("pkg",)))
    assert graph["pkg.d"] == {"pkg.a"}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_the_programs_start_without_loading_the_doubles_until_a_variant_is_named():
    """Importing and parsing a reference command line leaves ``gpushare_doubles``
    unloaded; naming a flavor or a fault loads it through the seam."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from gpushare_stack.extender import __main__ as e\n"
        "from gpushare_stack.deviceplugin import __main__ as d\n"
        "from gpushare_stack.dra import __main__ as r\n"
        "e.build_parser().parse_args([]); d.build_parser().parse_args(['--node-name=n'])\n"
        "r.build_parser().parse_args(['--node-name=n'])\n"
        f"assert {DOUBLES!r} not in sys.modules, 'loaded for the reference'\n"
        "assert e.build_parser().parse_args(['--fault=uneven-split']).fault == 'uneven-split'\n"
        f"assert {DOUBLES!r} in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", probe], cwd=REPO, check=True, timeout=120)


def test_without_the_doubles_a_program_runs_the_reference_and_refuses_variants(monkeypatch):
    import pytest

    from gpushare_stack import variants
    from gpushare_stack.extender import __main__ as extender_main

    monkeypatch.setattr(variants, "REGISTRY", "gpushare_no_such_doubles.registry")
    assert variants.load(variants.EXTENDER) is None
    assert variants.names(variants.EXTENDER, variants.FLAVOR) == (variants.REFERENCE,)
    with pytest.raises(variants.VariantError, match="test doubles"):
        variants.load(variants.EXTENDER, fault="uneven-split")
    parser = extender_main.build_parser()
    assert parser.parse_args(["--flavor=reference"]).flavor == variants.REFERENCE
    with pytest.raises(SystemExit):
        parser.parse_args(["--flavor=hami-like"])


def test_the_plugin_stays_thin():
    """Hooks and fixtures that call the framework, at pytest-kind's scale: what grows
    belongs in fixtures/framework/ or the providers, where it works without pytest."""
    lines = (REPO / "fixtures" / "plugin.py").read_text().count("\n")
    assert lines < 300, f"fixtures/plugin.py has {lines} lines"
