"""`nvidia-smi -q -x`: the `<nvidia_smi_log>` document.

Memory is read from `fb_memory_usage` by parent path: `bar1_memory_usage` reuses the
child names `total`/`used`/`free`, so a search by child name alone reads the wrong
figure. Cards are numbered in document order, which is nvidia-smi's index order.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from gpushare_conformance.evidence.errors import EvidenceParseError
from gpushare_conformance.evidence.smi_report import GpuInfo, MigDevice, NvidiaSmiReport
from gpushare_conformance.evidence.units import DIGITS

_MIB = re.compile(rf"^(?P<n>{DIGITS})\s*MiB$")
_INT = re.compile(rf"^{DIGITS}$")
_ROOT = "nvidia_smi_log"


def looks_like_xml(text: str) -> bool:
    return f"<{_ROOT}" in text


def _text(element: ET.Element | None, path: str) -> str | None:
    node = element.find(path) if element is not None else None
    if node is None or node.text is None:
        return None
    value = node.text.strip()
    return None if value in ("", "N/A", "[N/A]", "Not Supported", "[Not Supported]") else value


def _mib(element: ET.Element, path: str) -> int | None:
    value = _text(element, path)
    if value is None:
        return None
    match = _MIB.match(value)
    if not match:
        raise EvidenceParseError(f"nvidia-smi XML: <{path}> must be '<n> MiB' or N/A, got {value!r}")
    return int(match.group("n"))


def _int(element: ET.Element, path: str) -> int | None:
    value = _text(element, path)
    if value is None:
        return None
    if not _INT.match(value):
        raise EvidenceParseError(f"nvidia-smi XML: <{path}> must be an integer, got {value!r}")
    return int(value)


def parse_xml(text: str) -> NvidiaSmiReport:
    start = text.find("<?xml")
    if start < 0:
        start = text.find(f"<{_ROOT}")
    end = text.rfind(f"</{_ROOT}>")
    if end < 0:
        raise EvidenceParseError(f"nvidia-smi XML: no closing </{_ROOT}> (output cut short?)")
    skipped_lines = text.count("\n", 0, start)
    document = text[start : end + len(_ROOT) + 3]
    try:
        root = ET.fromstring(document)
    except ValueError as exc:  # text that has no UTF-8 form (a lone surrogate)
        raise EvidenceParseError(f"nvidia-smi XML: not well-formed ({exc})") from None
    except ET.ParseError as exc:
        number = exc.position[0] + skipped_lines
        lines = text.splitlines()
        raise EvidenceParseError(
            f"nvidia-smi XML: not well-formed ({exc})", number, lines[number - 1] if number <= len(lines) else ""
        ) from None
    if root.tag != _ROOT:
        raise EvidenceParseError(f"nvidia-smi XML: root element is <{root.tag}>, expected <{_ROOT}>")
    report = NvidiaSmiReport(
        format="xml", driver_version=_text(root, "driver_version"), cuda_version=_text(root, "cuda_version"), gpus=[]
    )
    for position, gpu_node in enumerate(root.findall("gpu")):
        gpu = GpuInfo(
            index=position,
            name=_text(gpu_node, "product_name"),
            memory_used_mib=_mib(gpu_node, "fb_memory_usage/used"),
            memory_total_mib=_mib(gpu_node, "fb_memory_usage/total"),
            memory_free_mib=_mib(gpu_node, "fb_memory_usage/free"),
            uuid=_text(gpu_node, "uuid"),
            bus_id=gpu_node.get("id") or _text(gpu_node, "pci/pci_bus_id"),
            mig_mode=_text(gpu_node, "mig_mode/current_mig"),
        )
        minor = _text(gpu_node, "minor_number")
        if minor is not None:
            gpu.other["minor_number"] = minor
        for mig_node in gpu_node.findall("mig_devices/mig_device"):
            gpu.mig_devices.append(
                MigDevice(
                    gpu_index=position,
                    gpu_instance_id=_int(mig_node, "gpu_instance_id"),
                    compute_instance_id=_int(mig_node, "compute_instance_id"),
                    device_index=_int(mig_node, "index"),
                    memory_used_mib=_mib(mig_node, "fb_memory_usage/used"),
                    memory_total_mib=_mib(mig_node, "fb_memory_usage/total"),
                )
            )
        report.gpus.append(gpu)
    attached = _int(root, "attached_gpus")
    if attached is not None and attached != len(report.gpus):
        raise EvidenceParseError(
            f"nvidia-smi XML: <attached_gpus> says {attached} but the document has {len(report.gpus)} <gpu> elements"
        )
    if not report.gpus:
        raise EvidenceParseError("nvidia-smi XML: no <gpu> element")
    return report
