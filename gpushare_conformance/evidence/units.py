"""Memory sizes as the tools print them."""

from __future__ import annotations

import re

_BINARY = {"B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B)\s*$", re.IGNORECASE)


def human_bytes_to_int(text: str) -> int:
    """Bytes from TensorFlow's HumanReadableNumBytes (`4.21GiB`, `512B`).

    The printed value has two decimals, so the result is the printed figure times the
    unit, rounded to a byte: it is as exact as the log, no more.
    """
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a size like '4.21GiB': {text!r}")
    number, unit = match.groups()
    unit = unit.upper()
    if unit not in _BINARY:
        unit = {"KB": "KIB", "MB": "MIB", "GB": "GIB", "TB": "TIB"}.get(unit, unit)
    return round(float(number) * _BINARY[unit])


def bytes_to_mib(value: int) -> int:
    """Nearest MiB."""
    return round(value / (1 << 20))
