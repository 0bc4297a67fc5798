"""Memory sizes as the tools print them."""

from __future__ import annotations

import re
from fractions import Fraction
from math import ceil, floor

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


# PyTorch's caching allocator prints sizes with its format_size: up to 1024 bytes as
# `<n> bytes`, then `%.2f` in KiB up to 1 MiB, MiB up to 1 GiB, GiB above (never TiB).
_TORCH_UNITS = {"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_TORCH_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(bytes|B|KiB|MiB|GiB)\s*$")
_PRINTED = re.compile(r"^\s*(\d+)(?:\.(\d+))?\s*([A-Za-z]+)\s*$")
_PRINTED_UNITS = {**_BINARY, "BYTES": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def torch_size_to_int(text: str) -> int:
    """Bytes from PyTorch's format_size (`20.00 MiB`, `0 bytes`, `6.00 GiB`).

    Like `human_bytes_to_int`, as exact as the two printed decimals allow.
    """
    match = _TORCH_SIZE.match(text)
    if not match:
        raise ValueError(f"not a PyTorch size like '20.00 MiB' or '0 bytes': {text!r}")
    number, unit = match.groups()
    return round(float(number) * _TORCH_UNITS[unit])


def printed_size_bounds(text: str) -> tuple[int, int]:
    """The closed range of byte counts that print as `text` (`4.21GiB`, `20.00 MiB`, `0 bytes`).

    A figure with d decimals stands for anything within half a unit of its last
    digit: `4.21GiB` is 4.205 to 4.215 GiB. Two printed totals of one card agree when
    their ranges overlap.
    """
    match = _PRINTED.match(text)
    if not match:
        raise ValueError(f"not a printed size like '4.21GiB' or '0 bytes': {text!r}")
    whole, decimals, unit = match.groups()
    scale = _PRINTED_UNITS.get(unit.upper())
    if scale is None:
        raise ValueError(f"unknown size unit {unit!r} in {text!r}")
    digits = len(decimals or "")
    value = Fraction(f"{whole}.{decimals}" if decimals else whole)
    half = Fraction(1, 2 * 10**digits)
    return ceil((value - half) * scale), floor((value + half) * scale)


def exact_bounds(value: int) -> tuple[int, int]:
    """A byte count printed in full."""
    return value, value


def mib_floor_bounds(mib: int) -> tuple[int, int]:
    """A size printed as whole MiB, cut down (`total_memory=4309MB` is bytes >> 20)."""
    return mib << 20, ((mib + 1) << 20) - 1
