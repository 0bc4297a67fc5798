"""The HTML report a person reads: a real run of the seed check on the session's local
cluster, its allure results turned into HTML by Allure 3 (npm, no Java), opened in
headless Chromium.

Needs what ``ci/setup.sh`` installs: Allure 3 under the cache
(``$GPUSHARE_CACHE/npm``, default ``/var/cache/gpushare-conformance/npm``) and Debian's
``chromium`` (``ci/host-packages.txt``). Either missing is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest

from gpushare_conformance.report import report_name
from gpushare_conformance.rules import AREAS, CHECKS, RULES

pytestmark = [pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
SEED = "conformance/test_seed.py::test_seed_job_gets_4gib_on_each_of_2_cards"
CACHE = Path(os.environ.get("GPUSHARE_CACHE", "/var/cache/gpushare-conformance"))
ALLURE = CACHE / "npm" / "node_modules" / ".bin" / "allure"
CHROMIUM = Path("/usr/bin/chromium")
CHILD_TIMEOUT_S = 900


def _tool(path: Path, how: str) -> Path:
    assert path.exists(), f"{path} is missing: {how}"
    return path


def _page_text(html: str) -> str:
    """What a person reads on the page: the DOM without scripts, styles and tags."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _open(url: str, profile: Path) -> str:
    """The page's DOM once its scripts have run, from headless Chromium (fresh profile)."""
    chromium = _tool(CHROMIUM, "install Debian's chromium (ci/host-packages.txt, ci/setup.sh)")
    argv = [
        str(chromium),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        # the report reads its data files next to index.html
        "--allow-file-access-from-files",
        "--virtual-time-budget=15000",
        "--dump-dom",
        url,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "<body" in done.stdout, (
        f"chromium on {url} exited {done.returncode}: {done.stderr[-2000:]}"
    )
    return _page_text(done.stdout)


@pytest.fixture(scope="module")
def seed_results(cluster, suite_options, tmp_path_factory) -> Path:
    """allure results of the seed check run on the session's cluster, as a user runs it
    (one run for this module's tests: they read its results and never change them)."""
    if suite_options.cluster != "local":
        pytest.skip(f"runs the seed check in a child pytest on --gpushare-cluster local, not {suite_options.cluster}")
    tmp_path = tmp_path_factory.mktemp("seed-run")
    results = tmp_path / "allure-results"
    argv = [
        sys.executable,
        "-m",
        "pytest",
        SEED,
        "--gpushare-cluster",
        "local",
        "--gpushare-keep-cluster-up",
        "-p",
        "no:cacheprovider",
        "-q",
        "--alluredir",
        str(results),
        "--gpushare-report-dir",
        str(tmp_path / "reports"),
    ]
    if suite_options.mock_inventory is not None:
        argv += ["--gpushare-mock-inventory", str(suite_options.mock_inventory)]
    child = subprocess.run(
        argv,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert child.returncode == 0, f"the seed check failed in the child run:\n{child.stdout[-4000:]}"
    assert "gpushare verdict summary" in child.stdout, "the child run prints the verdict summary"
    return results


def _seed_result(results: Path) -> dict:
    found = [json.loads(p.read_text()) for p in results.glob("*-result.json")]
    seeds = [r for r in found if r.get("fullName", "").endswith("#test_seed_job_gets_4gib_on_each_of_2_cards")]
    assert len(seeds) == 1, f"one result of the seed check, found {[r.get('fullName') for r in found]}"
    return seeds[0]


def test_allure_results_are_organised_like_the_seed(seed_results):
    result = _seed_result(seed_results)
    labels = {}
    for label in result["labels"]:
        labels.setdefault(label["name"], []).append(label["value"])
    assert result["name"] == "The seed's Job gets 4 GiB on each of 2 cards"
    assert labels["feature"] == [AREAS["seed"]] and labels["severity"] == ["blocker"]
    assert labels["parentSuite"] == [AREAS["seed"]]
    assert result["titlePath"] == [AREAS["seed"], RULES["multi_gpu_share"].words]
    assert set(labels["story"]) == {RULES[r].words for r in CHECKS["test_seed_job_gets_4gib_on_each_of_2_cards"].rules}
    assert any(link["url"].startswith("https://www.alibabacloud.com/") for link in result["links"])
    assert "Seed rules verified" in result["description"]
    containers = [json.loads(p.read_text()) for p in seed_results.glob("*-container.json")]
    afters = [a["name"] for c in containers for a in c.get("afters", [])]
    assert afters and not [a for a in afters if "<lambda>" in a], f"teardown noise: {afters}"
    env = (seed_results / "environment.properties").read_text()
    assert "cluster = local" in env and "stack = reference" in env


def test_html_report_shows_the_seed_check_its_steps_and_its_nvidia_smi(seed_results, tmp_path):
    allure = _tool(ALLURE, "run ci/setup.sh (npm install of allure 3 into the cache)")
    html = tmp_path / "allure-report"
    name = report_name({"stack": "reference", "cluster": "local"})
    done = subprocess.run(
        [str(allure), "generate", str(seed_results), "-o", str(html), "--report-name", name],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0 and (html / "index.html").exists(), f"allure generate: {done.stdout}{done.stderr}"

    overview = _open((html / "index.html").as_uri(), tmp_path / "profile-overview")
    assert name in overview, overview[:2000]
    assert AREAS["seed"] in overview, f"the tree is grouped by the seed's areas: {overview[:2000]}"

    seed_id = next(
        p.stem
        for p in (html / "data" / "test-results").glob("*.json")
        if "test_seed_job_gets_4gib_on_each_of_2_cards" in p.read_text()
    )
    page = _open(f"{(html / 'index.html').as_uri()}#{seed_id}", tmp_path / "profile-seed")
    assert "The seed's Job gets 4 GiB on each of 2 cards" in page, page[:3000]
    for step in (
        "Create the seed's Job: aliyun.com/gpu-mem 8, gpu-count 2",
        "Terminal (API exec): nvidia-smi lists 2 cards of about 4 GiB",
        "Logs: the totalMemory line appears twice, about 4 GiB each",
    ):
        assert step in page, f"step {step!r} not on the page: {page[:3000]}"
    assert "blocker" in page.lower() and "<lambda>" not in page

    attachments = _open(f"{(html / 'index.html').as_uri()}#{seed_id}/attachments", tmp_path / "profile-attachments")
    assert re.search(r"nvidia-smi \(API exec\) in tensorflow-mnist-multigpu-\w+", attachments), attachments[:3000]
