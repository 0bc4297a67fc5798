"""Read what `nvidia-smi` printed, in any of its output forms.

`parse_nvidia_smi` detects the form (default table of drivers 396-610, `-L`,
`--query-gpu ... --format=csv` with or without header/units, `-q -x` XML) and returns
one `NvidiaSmiReport`.

Zero cards: only nvidia-smi's own message `No devices were found` (alone on a line,
and no GPU listing anywhere in the input) is read as a legitimate report of zero
GPUs. Any other input that lists no card is an `EvidenceParseError`, so a failed
capture can never pass for "the pod saw no GPUs".
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpushare_conformance.evidence.errors import EvidenceParseError
from gpushare_conformance.evidence.smi_csv import CANONICAL_QUERY, looks_like_csv, parse_csv
from gpushare_conformance.evidence.smi_list import looks_like_list, parse_list
from gpushare_conformance.evidence.smi_report import GpuInfo, MigDevice, NvidiaSmiReport
from gpushare_conformance.evidence.smi_table import looks_like_table, parse_table
from gpushare_conformance.evidence.smi_xml import looks_like_xml, parse_xml

__all__ = ["CANONICAL_QUERY", "GpuInfo", "MigDevice", "NO_DEVICES_MESSAGE", "NvidiaSmiReport", "parse_nvidia_smi"]

NO_DEVICES_MESSAGE = "No devices were found"

# nvidia-smi's own failure messages: reported as such, not as "not nvidia-smi output".
_TOOL_ERRORS = re.compile(
    r"^(NVIDIA-SMI has failed.*|Failed to initialize NVML.*|Unable to determine the device handle.*|.*nvidia-smi: (?:command )?not found.*)$",
    re.IGNORECASE,
)

_EXPECTED = (
    "expected nvidia-smi output: the default table (a line '| NVIDIA-SMI <version> ...'), "
    "'-L' lines 'GPU 0: <name> (UUID: GPU-...)', '--query-gpu ... --format=csv' rows, "
    "'-q -x' XML (<nvidia_smi_log>), or the message 'No devices were found'"
)


def parse_nvidia_smi(text: str, csv_fields: Sequence[str] | None = None) -> NvidiaSmiReport:
    """Parse one nvidia-smi capture; `csv_fields` names the columns of headerless CSV."""
    if looks_like_xml(text):
        return parse_xml(text)
    if looks_like_table(text):
        return parse_table(text)
    if looks_like_list(text):
        return parse_list(text)
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if _TOOL_ERRORS.match(line.strip()):
            raise EvidenceParseError("nvidia-smi reported an error instead of a GPU listing", number, line)
    if any(line.strip() == NO_DEVICES_MESSAGE for line in lines):
        return NvidiaSmiReport(format="none", driver_version=None, cuda_version=None, gpus=[])
    if looks_like_csv(text, fields_given=csv_fields is not None):
        return parse_csv(text, csv_fields)
    first = next(((n, line) for n, line in enumerate(lines, 1) if line.strip()), None)
    if first is None:
        raise EvidenceParseError(f"input is empty; {_EXPECTED}")
    raise EvidenceParseError(_EXPECTED, first[0], first[1])
