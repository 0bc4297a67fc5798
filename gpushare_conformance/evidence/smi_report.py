"""What nvidia-smi says about the cards, whichever output form it came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class MigDevice:
    """One MIG instance of a card (from the `MIG devices:` table, `-L` or XML)."""

    gpu_index: int
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    device_index: int | None = None
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    profile: str | None = None
    uuid: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu_index": self.gpu_index,
            "gpu_instance_id": self.gpu_instance_id,
            "compute_instance_id": self.compute_instance_id,
            "device_index": self.device_index,
            "memory_used_mib": self.memory_used_mib,
            "memory_total_mib": self.memory_total_mib,
            "profile": self.profile,
            "uuid": self.uuid,
        }


@dataclass
class GpuInfo:
    """One card as nvidia-smi lists it.

    Memory figures are None where the output has none (`N/A`, MIG-enabled cards in
    the table of recent drivers, `-L`, a CSV query without the column): unknown is
    not zero.
    """

    index: int
    name: str | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    memory_free_mib: int | None = None
    uuid: str | None = None
    bus_id: str | None = None
    mig_mode: str | None = None
    mig_devices: list[MigDevice] = field(default_factory=list)
    other: dict[str, str | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "name": self.name,
            "memory_used_mib": self.memory_used_mib,
            "memory_total_mib": self.memory_total_mib,
        }
        optional = {
            "memory_free_mib": self.memory_free_mib,
            "uuid": self.uuid,
            "bus_id": self.bus_id,
            "mig_mode": self.mig_mode,
        }
        out.update({key: value for key, value in optional.items() if value is not None})
        if self.mig_devices:
            out["mig_devices"] = [mig.to_dict() for mig in self.mig_devices]
        if self.other:
            out["other"] = dict(self.other)
        return out


@dataclass
class NvidiaSmiReport:
    """The parsed output. `format` is `table`, `csv`, `list` (-L) or `xml`."""

    format: str
    driver_version: str | None
    cuda_version: str | None
    gpus: list[GpuInfo]
    nvidia_smi_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": self.format,
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "gpus": [gpu.to_dict() for gpu in self.gpus],
        }
        if self.nvidia_smi_version is not None:
            out["nvidia_smi_version"] = self.nvidia_smi_version
        return out
