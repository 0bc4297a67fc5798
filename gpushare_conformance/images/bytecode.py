"""Bytecode in the images' Python layers.

The images' containers run with a read-only root, so Python cannot cache what it
compiles: without ``.pyc`` files every process compiles each module it imports again
(the workload's numpy and scikit-learn: about 4 s of CPU per pod; a stack component's
Kubernetes client and gRPC: about 3 s per start, against under 2 s with them).
The layers set every file's mtime to 0 (same content, same digest), so the bytecode is
written in the unchecked-hash form, which no timestamp invalidates.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Part of each cached layer's key: a layer built before bytecode was added, or with
# the builder's temporary paths or its hash seed in its bytecode, is rebuilt.
BYTECODE_FORM = "pyc-unchecked-hash-image-paths-seed-0"


def compile_tree(layer_root: Path, tree: Path) -> bool:
    """Compile every ``.py`` under ``tree`` (a folder of the layer being built at
    ``layer_root``) for this interpreter (the images' python3, which the layers' builders
    check); returns whether all compiled. A file that does not compile (a package's test
    data, say) stays source only, as Python would leave it.

    The same sources give the same bytes, so the same image digest (a changed digest
    restarts the local cluster's stack): the bytecode names each file by its path in the
    image, not the builder's temporary folder, and the compiler runs with a fixed hash
    seed (a set of strings in the code is written in the order its hashes give).
    """
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "compileall",
            "-q",
            "-q",
            "-j",
            "1",  # one process, the files in one order: nothing left to chance
            "--invalidation-mode",
            "unchecked-hash",
            "-d",
            "/" + tree.relative_to(layer_root).as_posix(),
            str(tree),
        ],
        env={**os.environ, "PYTHONHASHSEED": "0"},
        check=False,
    )
    return result.returncode == 0
