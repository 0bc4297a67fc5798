"""The project installs under its own names and is a well-behaved pytest plugin.

- every package of the tree is in pyproject's list, mapped below ``gpushare_conformance``;
- a venv holding this project and testing-cabal's ``fixtures`` imports both, and
  removing one leaves the other whole;
- pytest in an unrelated project of the same venv behaves as if the plugin were not
  installed, and pytest-kind's plugin keeps its options and fixture.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from conftest import REPO, WHEEL_CACHE, Venv
from conftest import run_ok as _run


def _declared() -> tuple[list[str], dict[str, str]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    return config["packages"], config["package-dir"]


def test_every_package_of_the_tree_is_installed_below_the_project_names():
    packages, mapping = _declared()
    roots = {
        "gpushare_conformance": REPO / "gpushare_conformance",
        "gpushare_stack": REPO / "gpushare_stack",
        "gpushare_doubles": REPO / "gpushare_doubles",
        **{name: REPO / path for name, path in mapping.items()},
    }
    found = set()
    for name, root in roots.items():
        for init in root.rglob("__init__.py"):
            if "__pycache__" in init.parts or "build" in init.relative_to(root).parts:
                continue
            rel = init.parent.relative_to(root).parts
            found.add(".".join((name, *rel)))
    assert sorted(found - set(packages)) == [], "packages missing from pyproject's [tool.setuptools] packages"
    assert sorted(set(packages) - found) == [], "pyproject lists packages that do not exist"
    assert all(p.split(".")[0] in ("gpushare_conformance", "gpushare_stack", "gpushare_doubles") for p in packages)
    entry = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]
    assert entry == {"gpushare_conformance": "gpushare_conformance.fixtures.plugin"}


def _fixtures_wheel(tmp_path: Path) -> Path:
    """testing-cabal's fixtures wheel: from the setup's cache, else from PyPI."""
    cached = sorted(WHEEL_CACHE.glob("fixtures-*.whl"))
    if cached:
        return cached[-1]
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "fixtures", "-d", str(tmp_path)])
    return sorted(tmp_path.glob("fixtures-*.whl"))[-1]


def test_installs_beside_testing_cabal_fixtures_without_either_breaking(
    tmp_path, project_wheel: Path, fresh_venv: Venv
):
    ours = project_wheel
    theirs = _fixtures_wheel(tmp_path)
    python, site, pip = fresh_venv.python, fresh_venv.site, fresh_venv.pip
    _run([*pip, "install", "--quiet", "--no-deps", "--no-index", str(theirs), str(ours)])
    top = sorted(p.name for p in site.iterdir())
    assert "conformance" not in top, f"a top-level 'conformance' package was installed: {top}"
    assert (site / "fixtures" / "fixture.py").is_file(), "testing-cabal's fixtures was overwritten"
    assert not (site / "fixtures" / "plugin.py").exists(), "our plugin landed in testing-cabal's fixtures package"
    probe = (
        "import fixtures, gpushare_conformance.fixtures.framework.wait as w, gpushare_conformance.conformance;"
        "assert hasattr(fixtures, 'Fixture') and hasattr(fixtures, 'MonkeyPatch');"
        "assert callable(w.poll_until); print(fixtures.__file__)"
    )
    assert "site-packages/fixtures/__init__.py" in _run([str(python), "-c", probe], cwd=tmp_path).stdout
    _run([*pip, "uninstall", "--quiet", "--yes", "gpushare-conformance"])
    _run([str(python), "-c", "import fixtures; fixtures.Fixture"], cwd=tmp_path)
    assert not (site / "gpushare_conformance").exists()


UNRELATED_TESTS = """
import signal

import pytest


def test_keeps_default_sigterm():
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


@pytest.mark.gpu
def test_own_gpu_marker_runs():
    pass


def test_kind_options_are_pytest_kinds(pytestconfig):
    assert pytestconfig.getoption("keep_cluster") is True
    assert pytestconfig.getoption("cluster_name") == "pytest-kind"


def test_fails_on_purpose():
    assert 1 == 2
"""


def test_an_unrelated_project_sees_no_trace_of_the_plugin(tmp_path):
    project = tmp_path / "other"
    project.mkdir()
    (project / "test_other.py").write_text(UNRELATED_TESTS)
    (project / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: the other project's own marker\n")

    # The other project's own environment: none of the options this test command gives
    # its children (tests/conftest.py leaves pytest-kind out of them).
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}

    def pytest_run(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "--keep-cluster", *extra],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )

    with_plugin, without = pytest_run(), pytest_run("-p", "no:gpushare_conformance")
    assert with_plugin.returncode == without.returncode == 1, with_plugin.stdout + with_plugin.stderr

    def outcomes(out: str) -> list[str]:
        return [line for line in out.splitlines() if re.match(r"^(PASSED|FAILED|SKIPPED|ERROR) ", line)]

    assert outcomes(with_plugin.stdout) == outcomes(without.stdout)
    assert "3 passed, 1 failed" in with_plugin.stdout.replace("1 failed, 3 passed", "3 passed, 1 failed")
    assert "gpushare" not in with_plugin.stdout.lower().replace("gpushare-conformance-0.1.0", "")
    fixtures_list = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--fixtures"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    ).stdout
    assert "kind_cluster" in fixtures_list, "pytest-kind's fixture is gone"
