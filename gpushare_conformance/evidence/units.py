"""Memory sizes as the tools print them, and the number syntax every evidence parser shares.

Digits are ASCII only (`[0-9]`, never `\\d` or `str.isdigit()`, which also accept `²`
or `٣`), and a number has at most 18 digits (15 before and after a decimal point), so
`int()` never meets its 4300-digit limit and no float overflows.
"""

from __future__ import annotations

import re
from fractions import Fraction
from math import ceil, floor

# an integer field (index, MiB, bytes), for regular expressions
DIGITS = r"[0-9]{1,18}"
# a printed figure with optional decimals
NUMBER = r"[0-9]{1,15}(?:\.[0-9]{1,15})?"

_BINARY = {"B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}
_DECIMAL_SPELLING = {"KB": "KIB", "MB": "MIB", "GB": "GIB", "TB": "TIB"}

_SIZE = re.compile(rf"^\s*({NUMBER})\s*([A-Za-z]{{1,5}})\s*$")


def human_bytes_to_int(text: str) -> int:
    """Bytes from TensorFlow's HumanReadableNumBytes (`4.21GiB`, `512B`).

    The printed value has two decimals, so the result is the printed figure times the
    unit, rounded to a byte: it is as exact as the log, no more.
    """
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a size like '4.21GiB': {text[:40]!r}")
    number, unit = match.groups()
    scale = _BINARY.get(_DECIMAL_SPELLING.get(unit.upper(), unit.upper()))
    if scale is None:
        raise ValueError(f"unknown size unit {unit!r} in {text!r}")
    return round(float(number) * scale)


def bytes_to_mib(value: int) -> int:
    """Nearest MiB."""
    return round(value / (1 << 20))


# PyTorch's caching allocator prints sizes with its format_size: up to 1024 bytes as
# `<n> bytes`, then `%.2f` in KiB up to 1 MiB, MiB up to 1 GiB, GiB above (never TiB).
_TORCH_UNITS = {"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_TORCH_SIZE = re.compile(rf"^\s*({NUMBER})\s*(bytes|B|KiB|MiB|GiB)\s*$")
_PRINTED = re.compile(r"^\s*([0-9]{1,15})(?:\.([0-9]{1,15}))?\s*([A-Za-z]{1,5})\s*$")
_PRINTED_UNITS = {**_BINARY, "BYTES": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def torch_size_to_int(text: str) -> int:
    """Bytes from PyTorch's format_size (`20.00 MiB`, `0 bytes`, `6.00 GiB`).

    Like `human_bytes_to_int`, as exact as the two printed decimals allow.
    """
    match = _TORCH_SIZE.match(text)
    if not match:
        raise ValueError(f"not a PyTorch size like '20.00 MiB' or '0 bytes': {text[:40]!r}")
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
        raise ValueError(f"not a printed size like '4.21GiB' or '0 bytes': {text[:40]!r}")
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
