"""Making a card of a mock node sick: the inventory rewritten in place, restored exactly."""

from __future__ import annotations

import os

import pytest
import yaml

from gpushare_conformance.fixtures.framework import mockgpu
from gpushare_conformance.fixtures.inventory import load_inventory

INVENTORY = """\
# The node's cards.
driver_version: "470.82.01"
gpus:
  - name: Tesla V100-SXM2-16GB
    memory_mib: 16160
    pci_bus_id: "00000000:00:07.0"
  - {name: Tesla T4, memory_mib: 15079}
"""


def test_a_card_is_lost_inside_and_the_exact_text_comes_back(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY)
    inode = os.stat(path).st_ino
    with mockgpu.card_lost(path, 1):
        doc = yaml.safe_load(path.read_text())
        assert [g.get("lost") for g in doc["gpus"]] == [None, True]
        assert doc["gpus"][0]["pci_bus_id"] == "00000000:00:07.0" and doc["driver_version"] == "470.82.01"
        load_inventory(path)  # what the suite's own parser takes, the mock driver takes
        assert os.stat(path).st_ino == inode, "rewritten in place: containers have the file bind-mounted"
    assert path.read_text() == INVENTORY and os.stat(path).st_ino == inode


def test_the_text_comes_back_when_the_body_fails(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY)
    with pytest.raises(RuntimeError, match="check failed"), mockgpu.card_lost(path, 0):
        raise RuntimeError("check failed")
    assert path.read_text() == INVENTORY


@pytest.mark.parametrize("index", [-1, 2])
def test_a_card_the_inventory_does_not_list_is_refused_and_nothing_written(tmp_path, index):
    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY)
    with pytest.raises(mockgpu.MockGpuError, match=rf"no card {index} to lose \(gpus lists 2\)"):
        with mockgpu.card_lost(path, index):
            pass
    assert path.read_text() == INVENTORY


def test_shorter_text_leaves_no_tail_of_the_longer(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_text("a: 1\n" * 10)
    mockgpu.write_in_place(path, "b: 2\n")
    assert path.read_text() == "b: 2\n"


def test_xids_are_raised_inside_and_the_exact_text_comes_back(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY)
    inode = os.stat(path).st_ino
    with mockgpu.card_xids(path) as raise_xids:
        raise_xids({0: 48})
        assert [g["xid"] for g in load_inventory(path)["gpus"]] == [48, 0]
        raise_xids({0: 48, 1: 43})  # each call starts from the original text
        assert [g["xid"] for g in load_inventory(path)["gpus"]] == [48, 43]
        with pytest.raises(mockgpu.MockGpuError, match=r"no card 2 to raise an Xid on \(gpus lists 2\)"):
            raise_xids({2: 48})
        assert os.stat(path).st_ino == inode
    assert path.read_text() == INVENTORY and os.stat(path).st_ino == inode
