"""Every duration and path given is checked first, with a message naming the option and the value."""

from __future__ import annotations

import math

import pytest

from gpushare_conformance import cli
from gpushare_conformance.fixtures.framework.timeouts import Timeouts, TimeoutsError
from gpushare_conformance.fixtures.framework.wait import poll_until
from gpushare_conformance.fixtures.options import OptionError, SuiteOptions
from gpushare_conformance.fixtures.providers.local import cluster as local_cluster
from gpushare_conformance.fixtures.providers.local.cluster import DEFAULT_INVENTORY, LocalClusterError, LocalProvider
from gpushare_conformance.fixtures.providers.local.processes import ProcessTable

BAD_SECONDS = ["nan", "inf", "-inf", "1e400", "0", "-1"]


@pytest.mark.parametrize("raw", BAD_SECONDS)
def test_a_named_timeout_must_be_finite_and_positive(raw):
    with pytest.raises(
        OptionError,
        match=rf"--gpushare-timeout pod_start={raw}: not a finite|--gpushare-timeout pod_start={float(raw)}: must be a positive",
    ):
        SuiteOptions.from_values({"gpushare_timeouts": [f"pod_start={raw}"]})


@pytest.mark.parametrize("raw", BAD_SECONDS)
def test_the_wait_timeout_must_be_finite_and_positive(raw):
    with pytest.raises(OptionError, match=rf"--gpushare-wait-timeout: .*{raw!r}"):
        SuiteOptions.from_values({"gpushare_wait_timeout": raw})


@pytest.mark.parametrize("value", [math.nan, math.inf, 0.0, -1.0])
def test_timeouts_refuse_what_no_wait_can_use(value):
    with pytest.raises(TimeoutsError, match="not a finite number of seconds|must be a positive number"):
        Timeouts().with_overrides({"exec": value})
    with pytest.raises(TimeoutsError, match="--gpushare-wait-timeout" if not math.isfinite(value) else "pod_start"):
        Timeouts.parse([], wait_timeout=value)


def test_good_durations_still_parse():
    o = SuiteOptions.from_values({"gpushare_wait_timeout": "30", "gpushare_timeouts": ["exec=1.5"]})
    assert (o.wait_timeout, o.timeouts.pod_start, o.timeouts.exec) == (30.0, 30.0, 1.5)


@pytest.mark.parametrize("timeout", [math.nan, math.inf, -1.0])
def test_poll_until_refuses_a_wait_that_could_never_end(timeout):
    calls = []
    with pytest.raises(ValueError, match=r"the pod: the time-out must be a finite number of seconds"):
        poll_until(lambda: calls.append(1), lambda _: False, timeout=timeout, what="the pod")
    assert not calls


# ------------------------------------------------------------ cluster up --inventory
@pytest.fixture
def untouchable(monkeypatch):
    """A local provider that must stop before it tears down, builds or reuses anything."""

    def forbidden(*args, **kwargs):
        raise AssertionError("the inventory was not checked first")

    for name in ("down", "_up", "_handle", "_import_images", "_wait_gpu_resources"):
        monkeypatch.setattr(LocalProvider, name, forbidden)
    monkeypatch.setattr(local_cluster.os, "geteuid", lambda: 0)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gpus: [", "YAML syntax error"),
        ("hello\n", "expected a mapping"),
        ('driver_version: "1"\ngpus: []\n', "cuda_version"),
    ],
)
def test_a_bad_inventory_is_refused_before_anything_is_torn_down(tmp_path, untouchable, monkeypatch, text, says):
    monkeypatch.setattr(LocalProvider, "_running", lambda self: pytest.fail("checked the cluster first"))
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(text)
    with pytest.raises(LocalClusterError, match=f"--inventory: .*{says}"):
        LocalProvider(state_dir=tmp_path / "state", inventory=inventory).up(lambda _: None)
    assert not (tmp_path / "state").exists()


def test_a_running_cluster_with_another_inventory_is_refused(tmp_path, untouchable, monkeypatch):
    installed = tmp_path / "installed.yaml"
    installed.write_bytes(DEFAULT_INVENTORY.read_bytes())
    monkeypatch.setattr(local_cluster.mockdriver, "INVENTORY_PATH", installed)
    monkeypatch.setattr(LocalProvider, "_running", lambda self: True)
    other = tmp_path / "other.yaml"
    other.write_text(DEFAULT_INVENTORY.read_text().replace("16160", "32510", 1))
    with pytest.raises(
        LocalClusterError, match=rf"--inventory {other}: the local cluster already running .*take it down"
    ):
        LocalProvider(state_dir=tmp_path / "state", inventory=other).up(lambda _: None)


def test_a_running_cluster_with_the_same_or_no_inventory_is_reused(tmp_path, monkeypatch):
    installed = tmp_path / "installed.yaml"
    installed.write_bytes(DEFAULT_INVENTORY.read_bytes())
    monkeypatch.setattr(local_cluster.mockdriver, "INVENTORY_PATH", installed)
    for inventory in (DEFAULT_INVENTORY, None):
        LocalProvider(state_dir=tmp_path / "state", inventory=inventory)._refuse_other_inventory()


# ------------------------------------------------------------ cluster status --state-dir
def test_a_process_table_creates_nothing_until_a_process_starts(tmp_path):
    table = ProcessTable(tmp_path / "state")
    assert table.pid("etcd") is None and table.names() == [] and table.tail("etcd") == "(no log)"
    assert not (tmp_path / "state").exists()
    (tmp_path / "file").write_text("")
    assert ProcessTable(tmp_path / "file" / "state").pid("etcd") is None


@pytest.mark.parametrize("where", ["missing/state", "file", "file/state"])
def test_cluster_status_on_a_bad_state_dir_says_so_and_creates_nothing(tmp_path, capsys, where):
    (tmp_path / "file").write_text("")
    state = tmp_path / where
    assert cli.main(["cluster", "status", "--state-dir", str(state)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --state-dir {state}: ") and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
