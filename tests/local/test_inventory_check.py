"""`cluster up --inventory` refuses a bad inventory before starting anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushare_conformance import native
from gpushare_conformance.fixtures.providers.local.cluster import DEFAULT_INVENTORY, LocalClusterError, LocalProvider

HEADER = 'driver_version: "470.82.01"\ncuda_version: "11.4"\ngpus:\n'


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    native.ensure_built()


def _check(tmp_path: Path, body: str) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(HEADER + body)
    LocalProvider(state_dir=tmp_path / "state", inventory=inventory)._check_inventory()


def test_default_inventory_is_accepted() -> None:
    LocalProvider(inventory=DEFAULT_INVENTORY)._check_inventory()


def test_non_integer_memory_names_field_and_value(tmp_path: Path) -> None:
    with pytest.raises(
        LocalClusterError,
        match=r"inventory.yaml:5: gpus\[0\]\.memory_mib: expected a positive integer \(MiB\), got 'lots'",
    ):
        _check(tmp_path, "  - name: X\n    memory_mib: lots\n")


def test_bad_bus_id_is_refused_by_the_mock_nvml_itself(tmp_path: Path) -> None:
    with pytest.raises(LocalClusterError, match=r"pci_bus_id.*got 'zz'"):
        _check(tmp_path, "  - name: X\n    memory_mib: 16160\n    pci_bus_id: zz\n")
