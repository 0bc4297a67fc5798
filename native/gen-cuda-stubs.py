#!/usr/bin/env python3
"""Generate the mock libcuda's full export list from the real cuda.h.

    gen-cuda-stubs.py CC INCLUDE_DIR OUT_DIR

Writes, into OUT_DIR:

- cuda_stubs.c: one weak definition for every function cuda.h declares (the
  versioned ``_v2``/``_v3``, ``_ptsz``/``_ptds`` and the legacy unversioned names, as
  the header declares them for the driver's own build).  A definition in the mock's
  sources overrides the weak one at link time; the rest answer like a driver that
  lacks the feature: CUDA_ERROR_NOT_INITIALIZED before cuInit, CUDA_ERROR_INVALID_VALUE
  for a NULL output pointer, otherwise CUDA_ERROR_NOT_SUPPORTED.
- cuda_procs.h: the cuGetProcAddress table (base name, CUDA version, per-thread
  stream flavour, function), derived from cudaTypedefs.h's ``PFN_<name>_v<version>``
  typedefs by matching each typedef's parameter types to a declared function, and the
  list of every exported name.
- cuda_exports.txt: the exported names, one a line (for tests and the build check).

The header is read through the C preprocessor with __CUDA_API_VERSION_INTERNAL, so
that every name it can bind a program to is declared once with its real signature.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

# Answer before cuInit, as the driver does.
NO_INIT = {
    "cuInit",
    "cuDriverGetVersion",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuGetProcAddress",
    "cuGetProcAddress_v2",
    "cuGetExportTable",
}
TYPE_WORDS = {
    "int",
    "char",
    "long",
    "short",
    "unsigned",
    "signed",
    "float",
    "double",
    "void",
    "const",
    "struct",
    "enum",
    "volatile",
    "size_t",
}
# Non-const pointer parameters the driver fills in; the driver refuses NULL for them.
# CUDA names its outputs p<Name>/ph<Name>/pp..., or with an _out suffix.
OUTPUT_NAME = re.compile(r"^(p[A-Z_]\w*|ph[A-Z]\w*|pp\w*|pi|pctx|pfn|pbase|psize|pdptr|pPool|pool_out|\w+_out|\w+Out)$")
NOT_OUTPUT_TYPE = re.compile(r"^(const\b|void\s*\*$)")


def preprocess(cc: str, include: str, header: str) -> str:
    src = f"#include <{header}>\n"
    out = subprocess.run(
        [cc, "-E", "-P", "-D__CUDA_API_VERSION_INTERNAL", f"-I{include}", "-"],
        input=src,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def split_params(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return [] if parts == ["void"] else parts


def declarations(pp: str) -> dict[str, list[str]]:
    """name -> parameter declarations, for every `CUresult cuX(...);` (not inline bodies)."""
    decls: dict[str, list[str]] = {}
    for m in re.finditer(r"\bCUresult\s+(cu\w+)\s*\(", pp):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(pp[i], 0)
            i += 1
        rest = pp[i : i + 40].lstrip()
        if not rest.startswith(";"):
            continue  # an inline definition in the header, not an export
        decls.setdefault(m.group(1), split_params(pp[m.end() : i - 1]))
    return decls


def param_name(param: str) -> str | None:
    fp = re.search(r"\(\s*\*\s*(\w+)\s*\)", param)
    if fp:
        return fp.group(1)
    toks = re.findall(r"\w+|\*|\[|\]", param)
    words = [t for t in toks if t not in "*[]"]
    if len(toks) >= 2 and re.match(r"\w+$", toks[-1]) and toks[-1] not in TYPE_WORDS and len(words) >= 2:
        return toks[-1]
    arr = re.search(r"(\w+)\s*\[", param)
    return arr.group(1) if arr else None


def param_type(param: str, aliases: dict[str, str]) -> str:
    name = param_name(param)
    toks = re.findall(r"\w+|\*|\[|\]|\(|\)", param)
    if name:
        idx = len(toks) - 1 - toks[::-1].index(name)
        del toks[idx]
    out = []
    for t in toks:
        while t in aliases:
            t = aliases[t]
        out.append(t)
    return " ".join(out).replace("[ ]", "*")


def type_aliases(pp: str) -> dict[str, str]:
    return {new: old for old, new in re.findall(r"\btypedef\s+(\w+)\s+(\w+)\s*;", pp) if old != new}


def pfn_typedefs(pp: str) -> list[tuple[str, int, str, list[str]]]:
    """(base, version, flavour, params) for every `typedef CUresult (*PFN_base_vNNNN[_ptds])(...)`."""
    found = []
    for m in re.finditer(r"typedef\s+CUresult\s*\(\s*\*\s*PFN_(\w+?)_v(\d{4,5})(_ptds|_ptsz)?\s*\)\s*\(", pp):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(pp[i], 0)
            i += 1
        found.append((m.group(1), int(m.group(2)), m.group(3) or "", split_params(pp[m.end() : i - 1])))
    return found


def proc_table(decls, typedefs, aliases):
    """(base, version, ptds, symbol) entries: per base and flavour, the versions in
    ascending order bind to the declared functions base, base_v2, base_v3, ... in
    ascending order, each to the first one whose parameter types match."""
    sig = {n: [param_type(p, aliases) for p in ps] for n, ps in decls.items()}
    groups: dict[tuple[str, str], list[tuple[int, list[str]]]] = {}
    for base, ver, flav, params in typedefs:
        groups.setdefault((base, flav), []).append((ver, [param_type(p, aliases) for p in params]))
    entries, unmatched = [], []
    for (base, flav), versions in sorted(groups.items()):
        cands = [base] + [f"{base}_v{k}" for k in range(2, 10)]
        cands = [c + flav for c in cands if c + flav in decls]
        j = 0
        for ver, types in sorted(set((v, tuple(t)) for v, t in versions)):
            k = next((k for k in range(j, len(cands)) if sig[cands[k]] == list(types)), None)
            if k is None:
                unmatched.append(f"{base}_v{ver}{flav}")
                continue
            entries.append((base, ver, 1 if flav else 0, cands[k]))
            j = k + 1
    return entries, unmatched


def handle_types(pp: str) -> set[str]:
    """Opaque handles (`typedef struct X_st *CUx;`) and the scalar ids the driver hands out."""
    return set(re.findall(r"\btypedef\s+struct\s+\w+\s*\*\s*(\w+)\s*;", pp)) | {
        "CUdevice",
        "CUdeviceptr",
        "CUmemGenericAllocationHandle",
        "CUtexObject",
        "CUsurfObject",
    }


def is_output(param: str, handles: set[str]) -> bool:
    """A result the driver writes: named like one, or a single non-const pointer to a
    handle that is not an array (arrays are plural, and may be NULL with a zero count)."""
    name = param_name(param)
    if not name or "*" not in param or NOT_OUTPUT_TYPE.match(param.strip()):
        return False
    if re.match(r"^\s*void\s*\*\s*\w+\s*$", param):
        return False
    if OUTPUT_NAME.match(name):
        return True
    m = re.match(r"^\s*(\w+)\s*\*\s*(\w+)\s*$", param)
    return bool(m and m.group(1) in handles and not name.endswith("s") and name not in ("from", "to"))


def stub(name: str, params: list[str], handles: set[str]) -> str:
    named, checks = [], []
    for i, p in enumerate(params):
        n = param_name(p)
        if not n:
            n = f"arg{i}"
            p = f"{p} {n}"
        named.append(p)
        if is_output(p, handles):
            checks.append(n)
    body = []
    if name not in NO_INIT:
        body.append("    if (!cuda_stub_initialised()) return CUDA_ERROR_NOT_INITIALIZED;")
    for n in checks:
        body.append(f"    if (!{n}) return CUDA_ERROR_INVALID_VALUE;")
    used = [param_name(p) for p in named]
    body.append("    " + "".join(f"(void){u}; " for u in used if u) + "return CUDA_ERROR_NOT_SUPPORTED;")
    return f"STUB CUresult {name}({', '.join(named) or 'void'}) {{\n" + "\n".join(body) + "\n}\n"


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    cc, include, out_dir = sys.argv[1:]
    out = Path(out_dir)
    pp = preprocess(cc, include, "cuda.h")
    decls = declarations(pp)
    if len(decls) < 100:
        print(f"gen-cuda-stubs: only {len(decls)} declarations found in {include}/cuda.h", file=sys.stderr)
        return 1
    aliases = type_aliases(pp)
    typedefs = (
        pfn_typedefs(preprocess(cc, include, "cudaTypedefs.h")) if (Path(include) / "cudaTypedefs.h").exists() else []
    )
    entries, unmatched = proc_table(decls, typedefs, aliases)
    names = sorted(decls)

    stubs = [
        "/* Generated by gen-cuda-stubs.py from cuda.h; do not edit. */",
        "#define __CUDA_API_VERSION_INTERNAL 1",
        "#include <cuda.h>",
        '#include "cuda_internal.h"',
        '#define STUB __attribute__((weak, visibility("default")))',
        "",
    ]
    handles = handle_types(pp)
    stubs += [stub(n, decls[n], handles) for n in names]
    (out / "cuda_stubs.c.tmp").write_text("\n".join(stubs))

    procs = [
        "/* Generated by gen-cuda-stubs.py from cuda.h and cudaTypedefs.h; do not edit. */",
        "#ifndef GPUSHARE_CUDA_PROCS_H",
        "#define GPUSHARE_CUDA_PROCS_H",
        f"/* typedefs without a matching declaration: {', '.join(unmatched) or 'none'} */",
        "typedef struct { const char *base; int version; int ptds; void *fn; } cuda_proc_t;",
        "typedef struct { const char *name; void *fn; } cuda_export_t;",
        "/* Sorted by base name, then version ascending. */",
        "static const cuda_proc_t CUDA_PROCS[] = {",
    ]
    procs += [f'    {{"{b}", {v}, {p}, (void *){s}}},' for b, v, p, s in sorted(entries)]
    procs += ["};", "static const cuda_export_t CUDA_EXPORTS[] = {"]
    procs += [f'    {{"{n}", (void *){n}}},' for n in names]
    procs += [
        "};",
        "#define CUDA_PROCS_LEN (sizeof CUDA_PROCS / sizeof CUDA_PROCS[0])",
        "#define CUDA_EXPORTS_LEN (sizeof CUDA_EXPORTS / sizeof CUDA_EXPORTS[0])",
        "#endif",
        "",
    ]
    (out / "cuda_procs.h.tmp").write_text("\n".join(procs))
    (out / "cuda_exports.txt.tmp").write_text("".join(f"{n}\n" for n in names))
    for f in ("cuda_stubs.c", "cuda_procs.h", "cuda_exports.txt"):
        (out / f"{f}.tmp").replace(out / f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
