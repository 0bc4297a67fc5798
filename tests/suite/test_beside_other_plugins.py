"""The suite's pytest plugin is a good neighbour in an environment it shares.

Installed, the plugin loads into every pytest run of the environment (its ``pytest11``
entry point). So:

- importing it, and a pytest run that runs none of its checks, loads no Kubernetes
  client, allure, rich or YAML: only what the run would load without the plugin;
- in a fresh venv with this project and pytest-timeout, pytest-rerunfailures,
  pytest-cov and pytest-xdist (a user's environment, installed with pip), plain
  ``pytest`` in an unrelated project ends exactly as with ``-p no:gpushare_conformance``
  (exit status, every test's outcome), and pytest-timeout's own ``--timeout`` works
  (the suite's options all start with ``--gpushare-``, so none clashes with it).

The wheels come from the cache ``ci/setup.sh`` fills (``$GPUSHARE_CACHE/wheels``);
a cache that lacks one is completed from the package index into the test's folder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import WHEEL_CACHE, Venv, run_ok

NEIGHBOURS = ("pytest-timeout", "pytest-rerunfailures", "pytest-cov", "pytest-xdist")
HEAVY = ("kubernetes", "allure", "allure_commons", "rich", "yaml", "urllib3", "filelock", "grpc", "msgspec")
PLUGIN_MODULES = ("gpushare_conformance.fixtures.plugin", "gpushare_conformance.fixtures.reporting")


def _loaded_heavy(code: str) -> list[str]:
    out = run_ok(
        [
            sys.executable,
            "-c",
            f"{code}\nimport sys, json\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))",
        ]
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_importing_the_plugin_loads_no_heavy_library():
    assert _loaded_heavy("import " + ", ".join(PLUGIN_MODULES)) == []


RECORD_MODULES = """
import json, os, sys


def pytest_sessionfinish(session):
    watched = {heavy!r} + ("gpushare_conformance.fixtures.framework.context",)
    with open(os.environ["MODULES_OUT"], "w") as out:
        json.dump(sorted(m for m in watched if m in sys.modules), out)
"""


def test_a_run_without_checks_loads_nothing_the_plugin_would_not(tmp_path):
    # Other plugins of this environment load some of these themselves (allure-pytest:
    # allure; pytest-kind: yaml); the suite's plugin must add none.
    project = tmp_path / "other"
    project.mkdir()
    (project / "conftest.py").write_text(RECORD_MODULES.format(heavy=HEAVY))
    (project / "test_other.py").write_text("def test_plain():\n    pass\n")

    def loaded(*extra: str) -> list[str]:
        out = tmp_path / "modules.json"
        run_ok(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra],
            cwd=project,
            env={**_env(), "MODULES_OUT": str(out)},
        )
        return json.loads(out.read_text())

    with_plugin, without = loaded(), loaded("-p", "no:gpushare_conformance")
    assert "kubernetes" not in with_plugin
    assert with_plugin == without, f"the plugin loaded {sorted(set(with_plugin) - set(without))}"


def _env() -> dict[str, str]:
    """This environment less what would reach into the child pytest (its plugins, options)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.pop("PYTHONPATH", None)
    return env


def _install(venv: Venv, project_wheel: Path, tmp_path: Path) -> None:
    """This project (its wheel, with its dependencies) and the other plugins, from the
    wheel cache; what the cache lacks is fetched into the test's folder first."""
    wanted = [str(project_wheel), *NEIGHBOURS]
    offline = [*venv.pip, "install", "--quiet", "--no-index", "--find-links", str(WHEEL_CACHE)]
    result = subprocess.run([*offline, *wanted], capture_output=True, text=True, timeout=600)
    if result.returncode == 0:
        return
    fetched = tmp_path / "wheels"
    run_ok([sys.executable, "-m", "pip", "download", "--quiet", "-d", str(fetched), *wanted])
    run_ok([*offline, "--find-links", str(fetched), *wanted])


OTHER_PROJECT = """
import time


def test_passes():
    assert 1 + 1 == 2


def test_fails():
    assert 1 + 1 == 3


def test_sleeps():
    # Cut short by pytest-timeout when SLEEP_S is over its --timeout.
    time.sleep(float(__import__("os").environ.get("SLEEP_S", "0")))
"""


def _outcomes(stdout: str) -> list[str]:
    return sorted(line for line in stdout.splitlines() if re.match(r"^(PASSED|FAILED|SKIPPED|ERROR|RERUN) ", line))


def _counts(stdout: str) -> str:
    last = [line for line in stdout.splitlines() if line.startswith("=")][-1]
    return re.sub(r" in [\d.]+s.*", "", last).strip("= ")


def test_pytest_beside_timeout_rerunfailures_cov_and_xdist(tmp_path, project_wheel: Path, fresh_venv: Venv):
    _install(fresh_venv, project_wheel, tmp_path)
    project = tmp_path / "other"
    project.mkdir()
    (project / "test_other.py").write_text(OTHER_PROJECT)

    def pytest_run(*extra: str, sleep: float = 0) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(fresh_venv.python), "-m", "pytest", "-p", "no:cacheprovider", "-rA", *extra],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=300,
            env={**_env(), "SLEEP_S": str(sleep)},
        )

    version = run_ok([str(fresh_venv.python), "-m", "pytest", "--version", "--version"], cwd=project)
    plugins = version.stdout + version.stderr
    for name in ("gpushare-conformance", "pytest-timeout", "pytest-rerunfailures", "pytest-cov", "xdist"):
        assert name in plugins, f"{name} is not loaded in the venv:\n{plugins}"
    help_text = run_ok([str(fresh_venv.python), "-m", "pytest", "--help"], cwd=project).stdout
    assert "--timeout=" in help_text and "--gpushare-timeout" in help_text, "both time-out options are offered"

    cases = {
        "plain": (),
        "pytest-timeout": ("--timeout", "5"),
        "all four": ("--timeout", "5", "--reruns", "1", "-n", "2", "--cov", str(project), "--cov-report="),
    }
    for case, extra in cases.items():
        with_plugin, without = pytest_run(*extra), pytest_run(*extra, "-p", "no:gpushare_conformance")
        shown = f"{case}:\n{with_plugin.stdout[-3000:]}{with_plugin.stderr[-3000:]}"
        assert "conflicting option string" not in with_plugin.stderr, shown
        assert with_plugin.returncode == without.returncode == 1, shown
        assert _outcomes(with_plugin.stdout) == _outcomes(without.stdout), shown
        assert _counts(with_plugin.stdout) == _counts(without.stdout), shown
        assert re.match(r"1 failed, 2 passed", _counts(with_plugin.stdout)), shown

    # pytest-timeout's --timeout takes effect (and the suite's plugin does not take it).
    cut = pytest_run("--timeout", "2", "-k", "sleeps", sleep=60)
    assert cut.returncode == 1 and "Timeout" in cut.stdout, cut.stdout[-3000:] + cut.stderr[-3000:]
    assert "1 failed" in _counts(cut.stdout), cut.stdout[-3000:]
