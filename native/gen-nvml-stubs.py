#!/usr/bin/env python3
"""Write the C stubs that complete the mock NVML: one exported function for every
function nvml.h declares (legacy and versioned names, and the legacy aliases the
header #defines to another function) that the hand-written sources do not define.

A stub behaves like the real library on a card without the feature: argument checks
first (before nvmlInit: NVML_ERROR_UNINITIALIZED; a device handle that is not one of
ours, a NULL handle or a NULL required pointer: NVML_ERROR_INVALID_ARGUMENT), then
NVML_ERROR_NOT_SUPPORTED.

    gen-nvml-stubs.py --header nvml.h --cc gcc --out build/gen/nvml_stubs.c src/mock_nvml.c src/nvml_*.c
    gen-nvml-stubs.py --header nvml.h --cc gcc --list     # every name the library must export
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

DECL = re.compile(r"(?:^|[;}])\s*((?:const\s+)?\w+(?:\s*\*)*)\s*\b(nvml\w+)\s*\(([^()]*)\)\s*;", re.M)
POINTER_TYPEDEF = re.compile(r"typedef\s+struct\s+\w+\s*\*\s*(\w+)\s*;")
ALIAS = re.compile(r"^\s*#\s*define\s+(nvml\w+)\s+(nvml\w+)\s*$", re.M)
HAND_WRITTEN = re.compile(r"^\s*EXPORT\s+[\w\s\*]*?\b(nvml\w+)\s*\(", re.M)
# A pointer after one of these may be NULL: the call then asks for the size or count.
SIZE_QUERY = re.compile(r"(count|size|length|len)$", re.I)


@dataclass
class Param:
    text: str  # as declared
    name: str
    pointer: bool
    handle: str | None  # "device", "opaque" or None


@dataclass
class Func:
    ret: str
    name: str
    params: list[Param]


def preprocess(header: Path, cc: str) -> str:
    cmd = [*shlex.split(cc), "-E", "-P", "-DNVML_NO_UNVERSIONED_FUNC_DEFS", "-x", "c", str(header)]
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        sys.exit(f"gen-nvml-stubs: cannot preprocess {header} with {cc!r}: {getattr(exc, 'stderr', exc)}")


def parse_params(func: str, text: str, pointer_types: set[str]) -> list[Param]:
    text = " ".join(text.split())
    if text in ("", "void"):
        return []
    params = []
    for i, raw in enumerate(p.strip() for p in text.split(",")):
        m = re.match(r"^(.*?)(\w+)\s*(\[\s*\w*\s*\])?$", raw)
        if not m or not m.group(1).strip():
            sys.exit(f"gen-nvml-stubs: {func}: cannot read parameter {i} {raw!r}")
        type_text, name, array = m.group(1).strip(), m.group(2), m.group(3)
        pointer = "*" in type_text or bool(array)
        base = type_text.replace("const", "").replace("*", "").strip()
        handle = None
        if not pointer and base == "nvmlDevice_t":
            handle = "device"
        elif not pointer and base in pointer_types:
            handle = "opaque"
        params.append(Param(raw, name, pointer, handle))
    return params


def read_header(header: Path, cc: str) -> tuple[dict[str, Func], dict[str, str]]:
    """Declared functions by name, and legacy alias -> declared function."""
    pre = preprocess(header, cc)
    pointer_types = set(POINTER_TYPEDEF.findall(pre))
    funcs: dict[str, Func] = {}
    for ret, name, params in DECL.findall(pre):
        funcs[name] = Func(" ".join(ret.split()), name, parse_params(name, params, pointer_types))
    if "nvmlInit_v2" not in funcs or "nvmlInit" not in funcs:
        sys.exit(f"gen-nvml-stubs: {header}: found {len(funcs)} functions but not nvmlInit/nvmlInit_v2; is it nvml.h?")
    aliases = {a: b for a, b in ALIAS.findall(header.read_text()) if b in funcs and a not in funcs}
    return funcs, aliases


def hand_written(sources: list[Path]) -> set[str]:
    names: set[str] = set()
    for src in sources:
        names.update(HAND_WRITTEN.findall(src.read_text()))
    return names


def checks(func: Func) -> list[str]:
    """The argument checks, in the real library's order: init, handles, pointers."""
    lines = ["    if (!nvml_initialised()) return NVML_ERROR_UNINITIALIZED;"]
    for p in func.params:
        if p.handle == "device":
            lines.append(f"    if (!nvml_gpu({p.name})) return NVML_ERROR_INVALID_ARGUMENT;")
        elif p.handle == "opaque":
            lines.append(f"    if (!{p.name}) return NVML_ERROR_INVALID_ARGUMENT;")
    size_seen = False
    for p in func.params:
        if p.pointer and not size_seen:
            lines.append(f"    if (!{p.name}) return NVML_ERROR_INVALID_ARGUMENT;")
        if p.pointer and SIZE_QUERY.search(p.name):
            size_seen = True
    return lines


def signature(func: Func, name: str | None = None) -> str:
    params = ", ".join(p.text for p in func.params) or "void"
    return f"{func.ret} {name or func.name}({params})"


def generate(header: Path, funcs: dict[str, Func], aliases: dict[str, str], skip: set[str]) -> str:
    out = ['#include "nvml_engine.h"', "", '#pragma GCC diagnostic ignored "-Wunused-parameter"', ""]
    count = 0
    for name in sorted(funcs):
        if name in skip:
            continue
        func = funcs[name]
        if func.ret != "nvmlReturn_t":
            sys.exit(f"gen-nvml-stubs: {name} returns {func.ret}; write it by hand in src/")
        out += [f"EXPORT {signature(func)} {{", *checks(func), "    return NVML_ERROR_NOT_SUPPORTED;", "}", ""]
        count += 1
    for alias in sorted(aliases):
        if alias in skip:
            continue
        target = funcs[aliases[alias]]
        args = ", ".join(p.name for p in target.params)
        out += [
            f"EXPORT {signature(target, alias)};",
            f"EXPORT {signature(target, alias)} {{ return {target.name}({args}); }}",
            "",
        ]
        count += 1
    head = [
        f"/* Generated by native/gen-nvml-stubs.py from {header.name}: do not edit.",
        f" * {count} functions of the header that the hand-written mock does not implement. */",
    ]
    return "\n".join(head + out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--header", type=Path, required=True)
    ap.add_argument("--cc", default="gcc")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--list", action="store_true", help="print every name the library must export")
    ap.add_argument("sources", nargs="*", type=Path, help="hand-written sources (their EXPORT functions are skipped)")
    args = ap.parse_args()
    funcs, aliases = read_header(args.header, args.cc)
    if args.list:
        print("\n".join(sorted(set(funcs) | set(aliases))))
        return 0
    if not args.out:
        ap.error("--out or --list is required")
    skip = hand_written(args.sources)
    unknown = sorted(skip - set(funcs) - set(aliases))
    if unknown:
        sys.exit(f"gen-nvml-stubs: hand-written functions not in {args.header}: {', '.join(unknown)}")
    text = generate(args.header, funcs, aliases, skip)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
