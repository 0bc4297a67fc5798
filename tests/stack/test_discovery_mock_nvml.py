"""Discovery and health through real pynvml over the mock NVML (GPU-less mode).

Runs in a subprocess: the dynamic loader reads LD_LIBRARY_PATH only at process start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NATIVE = Path(os.environ.get("GPUSHARE_NATIVE_DIR", REPO / "native" / "build"))
MOCK_NVML = NATIVE / "lib" / "libnvidia-ml.so.1"

INVENTORY = """\
driver_version: "470.82.01"
cuda_version: "11.4"
gpus:
  - name: Tesla V100-SXM2-16GB
    memory_mib: 16160
  - name: Tesla V100-SXM2-16GB
    memory_mib: 16160
  - name: Tesla T4
    memory_mib: 15079
"""

SCRIPT = r"""
import json, sys
from gpushare_stack.deviceplugin.discovery import discover, node_cards_annotation
from gpushare_stack.deviceplugin.plugin import DevicePlugin

inventory = sys.argv[1]
plugin = DevicePlugin("node-1", discover, kube=None, socket_dir="/nonexistent")
before = [(d.id, d.health) for d in plugin.mem._devices()]
annotation = node_cards_annotation(plugin.cards, plugin.healthy)
text = open(inventory).read()
open(inventory, "w").write(text[: text.index("  - name: Tesla T4")])  # the T4 is gone
changed = plugin.poll_health()
after = [(d.id, d.health) for d in plugin.mem._devices()]
counts = [(d.id, d.health) for d in plugin.count._devices()]
print(json.dumps({"before": before, "after": after, "counts": counts, "changed": changed,
                  "annotation": json.loads(annotation)}))
"""


def _run_over_mock_nvml(tmp_path: Path, script: str) -> subprocess.CompletedProcess:
    """``script`` in a fresh Python over the mock NVML, given the path of an inventory of INVENTORY."""
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(INVENTORY)
    env = {**os.environ, "LD_LIBRARY_PATH": str(MOCK_NVML.parent), "GPUSHARE_MOCK_INVENTORY": str(inventory)}
    return subprocess.run(
        [sys.executable, "-c", script, str(inventory)], env=env, cwd=REPO, capture_output=True, text=True, timeout=60
    )


@pytest.mark.skipif(not MOCK_NVML.exists(), reason=f"mock NVML not built at {MOCK_NVML} (make -C native)")
def test_cards_from_mock_nvml_and_lost_card_turns_unhealthy(tmp_path):
    out = _run_over_mock_nvml(tmp_path, SCRIPT)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    cards = result["annotation"]
    assert [(c["index"], c["memory_mib"], c["memory_gib"], c["healthy"]) for c in cards] == [
        (0, 16160, 15, True),
        (1, 16160, 15, True),
        (2, 15079, 14, True),
    ]
    assert len({c["uuid"] for c in cards}) == 3 and all(c["uuid"].startswith("GPU-") for c in cards)
    assert len(result["before"]) == 15 + 15 + 14
    assert {h for _, h in result["before"]} == {"Healthy"}
    assert result["changed"] is True
    t4 = cards[2]["uuid"]
    assert {i for i, h in result["after"] if h == "Unhealthy"} == {f"{t4}-_-{k}" for k in range(14)}
    assert dict(result["counts"])[t4] == "Unhealthy"


LOST_SCRIPT = r"""
import json, sys
from gpushare_stack.deviceplugin.discovery import discover
from gpushare_stack.deviceplugin.plugin import DevicePlugin

inventory = sys.argv[1]
plugin = DevicePlugin("node-1", discover, kube=None, socket_dir="/nonexistent")
text = open(inventory).read()
with open(inventory, "r+") as f:  # in place, as the suite's sick-card check writes it
    f.write(text.replace("  - name: Tesla T4\n", "  - name: Tesla T4\n    lost: true\n", 1))
lost = (plugin.poll_health(), dict(plugin.healthy))
with open(inventory, "r+") as f:
    f.write(text)
    f.truncate()
back = (plugin.poll_health(), dict(plugin.healthy))
print(json.dumps({"uuids": [c.uuid for c in plugin.cards], "lost": lost, "back": back}))
"""


@pytest.mark.skipif(not MOCK_NVML.exists(), reason=f"mock NVML not built at {MOCK_NVML} (make -C native)")
def test_a_card_nvml_calls_lost_turns_unhealthy_alone_and_comes_back(tmp_path):
    out = _run_over_mock_nvml(tmp_path, LOST_SCRIPT)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    v100a, v100b, t4 = result["uuids"]
    assert result["lost"] == [True, {v100a: True, v100b: True, t4: False}], out.stderr
    assert "GPU is lost" in out.stderr, "the plugin says why the card is left out"
    assert result["back"] == [True, {v100a: True, v100b: True, t4: True}]


XID_SCRIPT = r"""
import json, logging, sys, time
logging.basicConfig(level=logging.INFO, format="%(message)s")
from gpushare_doubles import registry
from gpushare_stack.deviceplugin.discovery import discover
from gpushare_stack.deviceplugin.plugin import DevicePlugin

inventory, fault = sys.argv[1], sys.argv[2] or None
plugin = DevicePlugin("node-1", discover, kube=None, socket_dir="/nonexistent",
                      flavor=registry.device_plugin(fault=fault))
seen = []  # the Xids the watcher delivered, whatever the flavor made of them
deliver = plugin.on_xid
plugin.on_xid = lambda uuid, xid: (deliver(uuid, xid), seen.append(xid))  # seen once handled
watcher = plugin.watch_xids()
assert watcher.ready.wait(10)
text = open(inventory).read()
def xids(v100b, t4):
    with open(inventory, "r+") as f:  # in place, as the suite's sick-card check writes it
        f.write(text.replace("  - name: Tesla T4\n", f"  - name: Tesla T4\n    xid: {t4}\n", 1)
                    .replace("memory_mib: 16160\n  - name: Tesla T4", f"memory_mib: 16160\n    xid: {v100b}\n  - name: Tesla T4", 1))
        f.truncate()
def settle(xid=None):
    # The mock delivers within 50 ms; the watcher waits 1 s at a time. Wait for the
    # Xid itself (a loaded machine may take longer), then a moment for any other.
    deadline = time.monotonic() + 20
    while xid is not None and xid not in seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert xid is None or xid in seen, (xid, seen)
    time.sleep(0.3)
    return plugin.poll_health(), dict(plugin.healthy)
xids(43, 0)  # an application's error on the second V100
app = settle(43)
xids(43, 48)  # double-bit ECC on the T4
critical = settle(48)
xids(0, 0)
cleared = settle()
watcher.stop.set()
print(json.dumps({"uuids": [c.uuid for c in plugin.cards], "app": app, "critical": critical,
                  "cleared": cleared, "sick": plugin.xid_sick}))
"""


@pytest.mark.skipif(not MOCK_NVML.exists(), reason=f"mock NVML not built at {MOCK_NVML} (make -C native)")
@pytest.mark.parametrize("fault", ["", "ignores-xids"])
def test_a_critical_xid_turns_its_card_unhealthy_until_restart_an_application_one_does_not(tmp_path, fault):
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(INVENTORY)
    env = {**os.environ, "LD_LIBRARY_PATH": str(MOCK_NVML.parent), "GPUSHARE_MOCK_INVENTORY": str(inventory)}
    out = subprocess.run(
        [sys.executable, "-c", XID_SCRIPT, str(inventory), fault],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    v100a, v100b, t4 = result["uuids"]
    everyone = {v100a: True, v100b: True, t4: True}
    assert result["app"] == [False, everyone], out.stderr
    if fault:
        assert result["critical"] == [False, everyone] and result["sick"] == {}, out.stderr
        assert "FAULT INJECTED: ignores-xids: Xid 48" in out.stderr
    else:
        assert result["critical"] == [True, {**everyone, t4: False}], out.stderr
        assert result["cleared"] == [False, {**everyone, t4: False}], "sick until the plugin restarts"
        assert result["sick"] == {t4: 48}
        assert f"card {t4}: critical Xid 48" in out.stderr and f"card {v100b}: Xid 43" in out.stderr


LOST_AT_START_SCRIPT = r"""
import json, sys
from gpushare_stack.deviceplugin.discovery import discover
from gpushare_stack.deviceplugin.plugin import DevicePlugin

inventory = sys.argv[1]
text = open(inventory).read()
with open(inventory, "r+") as f:  # the T4 fell off the bus before the plugin started
    f.write(text.replace("  - name: Tesla T4\n", "  - name: Tesla T4\n    lost: true\n", 1))
plugin = DevicePlugin("node-1", discover, kube=None, socket_dir="/nonexistent")
at_start = ([c.index for c in plugin.cards], len(plugin.mem._devices()), len(plugin.count._devices()))
still = plugin.poll_health()
with open(inventory, "r+") as f:  # and comes back
    f.write(text)
    f.truncate()
back = (plugin.poll_health(), [c.index for c in plugin.cards], dict(plugin.healthy))
print(json.dumps({"at_start": at_start, "still": still, "back": back,
                  "mem": len(plugin.mem._devices()), "count": len(plugin.count._devices()),
                  "again": plugin.poll_health()}))
"""


@pytest.mark.skipif(not MOCK_NVML.exists(), reason=f"mock NVML not built at {MOCK_NVML} (make -C native)")
def test_a_card_lost_when_the_plugin_started_joins_once_it_is_back(tmp_path):
    """A plugin (re)started while a card was off the bus advertises that card once NVML
    reaches it again, at its next health poll, as a card that comes back to a running
    plugin does."""
    out = _run_over_mock_nvml(tmp_path, LOST_AT_START_SCRIPT)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["at_start"] == [[0, 1], 15 + 15, 2], result
    assert result["still"] is False, "nothing changed while the card stayed lost"
    changed, indexes, healthy = result["back"]
    assert changed is True and indexes == [0, 1, 2], result
    assert len(healthy) == 3 and all(healthy.values()), healthy
    assert (result["mem"], result["count"]) == (15 + 15 + 14, 3)
    assert result["again"] is False, "a card joins once"
    assert "joins what the node advertises" in out.stderr
