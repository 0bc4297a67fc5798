"""`nvidia-smi -L`: one line per card, MIG instances indented beneath.

Every non-blank line must be a GPU or MIG line; `-L` carries no memory figures, so
the cards' totals are None.
"""

from __future__ import annotations

import re

from gpushare_conformance.evidence.errors import EvidenceParseError
from gpushare_conformance.evidence.smi_report import GpuInfo, MigDevice, NvidiaSmiReport
from gpushare_conformance.evidence.units import DIGITS

# The name runs to the first `(UUID:`; it is read a run of characters at a time
# (possessively), so a line costs time in proportion to its length whatever it holds.
GPU_LINE = re.compile(
    rf"^GPU\s++(?P<index>{DIGITS}):\s*+(?P<name>(?:[^\s(]++|\s++(?!\(UUID:)|\((?!UUID:))*+)"
    r"\s*+\(UUID:\s*+(?P<uuid>[^)\s]++)\s*+\)$"
)
_MIG_LINE = re.compile(
    rf"^MIG\s++(?P<profile>\S++)\s++Device\s++(?P<dev>{DIGITS}):\s*+\(UUID:\s*+(?P<uuid>[^)\s]++)\s*+\)$"
)
_OLD_MIG_UUID = re.compile(rf"^MIG-GPU-[^/]++/(?P<gi>{DIGITS})/(?P<ci>{DIGITS})$")


def looks_like_list(text: str) -> bool:
    return any(GPU_LINE.match(line.strip()) for line in text.splitlines())


def parse_list(text: str) -> NvidiaSmiReport:
    report = NvidiaSmiReport(format="list", driver_version=None, cuda_version=None, gpus=[])
    indexes: set[int] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        gpu_match = GPU_LINE.match(line)
        if gpu_match:
            index = int(gpu_match.group("index"))
            if index in indexes:
                raise EvidenceParseError(f"nvidia-smi -L: GPU {index} listed twice", number, raw)
            indexes.add(index)
            report.gpus.append(
                GpuInfo(
                    index=index,
                    name=gpu_match.group("name"),
                    memory_used_mib=None,
                    memory_total_mib=None,
                    uuid=gpu_match.group("uuid"),
                )
            )
            continue
        mig_match = _MIG_LINE.match(line)
        if mig_match and report.gpus:
            owner = report.gpus[-1]
            old = _OLD_MIG_UUID.match(mig_match.group("uuid"))
            owner.mig_devices.append(
                MigDevice(
                    gpu_index=owner.index,
                    gpu_instance_id=int(old.group("gi")) if old else None,
                    compute_instance_id=int(old.group("ci")) if old else None,
                    device_index=int(mig_match.group("dev")),
                    profile=mig_match.group("profile"),
                    uuid=mig_match.group("uuid"),
                )
            )
            continue
        what = "a MIG line before any GPU line" if mig_match else "a line that is neither"
        raise EvidenceParseError(
            f"nvidia-smi -L: expected 'GPU <i>: <name> (UUID: GPU-...)' or '  MIG <profile> Device <n>: (UUID: MIG-...)', got {what}",
            number,
            raw,
        )
    if not report.gpus:
        raise EvidenceParseError("nvidia-smi -L: no 'GPU <i>: ...' line")
    return report
