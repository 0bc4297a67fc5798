"""Parsers for what a pod shows about its GPUs: nvidia-smi output and framework logs."""

from gpushare_conformance.evidence.errors import EvidenceParseError
from gpushare_conformance.evidence.nvidia_smi import GpuInfo, MigDevice, NvidiaSmiReport, parse_nvidia_smi
from gpushare_conformance.evidence.tf_log import TfDevice, TfLogReport, parse_tf_log

__all__ = [
    "EvidenceParseError",
    "GpuInfo",
    "MigDevice",
    "NvidiaSmiReport",
    "TfDevice",
    "TfLogReport",
    "parse_nvidia_smi",
    "parse_tf_log",
]
