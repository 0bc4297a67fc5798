"""Cost of the isolation shim on an allocation loop, against the bare mock driver.

Runs native/build/tests/alloc-loop (N x cuMemAlloc 1 MiB + cuMemFree, entry points
resolved with dlsym) in the seed's sandbox with and without the shim, and prints:

- the instruction ratio inside the loop (valgrind --tool=callgrind, collection
  limited to the loop function), and
- the wall-time ratio (best of several runs).

Target: both under 1.10x.  Usage: python benchmarks/shim_overhead.py [--iterations N]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gpushare_conformance import native
from gpushare_conformance.sandbox import sandbox_env

INVENTORY = """\
driver_version: "470.82.01"
cuda_version: "11.4"
gpus:
  - name: Tesla V100-SXM2-16GB
    memory_mib: 16160
"""
TARGET = 1.10


def instructions(loop: str, env: dict[str, str], iterations: int, workdir: Path) -> int:
    out = workdir / f"callgrind.{len(list(workdir.iterdir()))}"
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=alloc_free_loop",
                           f"--callgrind-out-file={out}", loop, str(iterations)], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"callgrind run failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    m = re.search(r"^summary:\s+(\d+)", out.read_text(), re.M) or re.search(r"^totals:\s+(\d+)", out.read_text(), re.M)
    if not m:
        raise RuntimeError(f"no instruction total in {out}")
    return int(m.group(1))


def wall_ns(loop: str, env: dict[str, str], iterations: int, repeats: int) -> int:
    best = None
    for _ in range(repeats):
        proc = subprocess.run([loop, str(iterations)], env=env, check=True, capture_output=True, text=True)
        ns = int(proc.stdout.strip())
        best = ns if best is None else min(best, ns)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200_000, help="loop length for the wall-time runs")
    parser.add_argument("--callgrind-iterations", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    root = native.ensure_built()
    loop = str(root / "tests" / "alloc-loop")
    with tempfile.TemporaryDirectory(prefix="gpushare-bench-") as tmp:
        work = Path(tmp)
        inv = work / "inventory.yaml"
        inv.write_text(INVENTORY)
        shim = sandbox_env(inv, [0], 8192, base_env=os.environ, usage_file=work / "usage", native_root=root)
        bare = sandbox_env(inv, [0], 8192, isolation=False, base_env=os.environ, native_root=root)
        print("alloc/free loop, 1 MiB blocks; shim limit 8192 MiB on one mock V100")
        if shutil.which("valgrind"):
            n = args.callgrind_iterations
            ir_bare, ir_shim = instructions(loop, bare, n, work), instructions(loop, shim, n, work)
            print(f"instructions/iteration: bare {ir_bare / n:.0f}, shim {ir_shim / n:.0f}, "
                  f"ratio {ir_shim / ir_bare:.3f}x (target < {TARGET:.2f}x)")
        else:
            print("instructions: valgrind not installed (ci/host-packages.txt lists it)")
        n = args.iterations
        t_bare, t_shim = wall_ns(loop, bare, n, args.repeats), wall_ns(loop, shim, n, args.repeats)
        print(f"wall time/iteration: bare {t_bare / n:.1f} ns, shim {t_shim / n:.1f} ns, "
              f"ratio {t_shim / t_bare:.3f}x (target < {TARGET:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
