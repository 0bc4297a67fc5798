"""Bytecode in the images' Python layers.

The images' containers run with a read-only root, so Python cannot cache what it
compiles: without ``.pyc`` files every process compiles each module it imports again
(the workload's numpy and scikit-learn: about 4 s of CPU per pod; a stack component's
Kubernetes client and gRPC: about 3 s per start, against under 2 s with them).
The layers set every file's mtime to 0 (same content, same digest), so the bytecode is
written in the unchecked-hash form, which no timestamp invalidates.
"""

from __future__ import annotations

import compileall
import py_compile
from pathlib import Path

# Part of each cached layer's key: a layer built before bytecode was added, or with
# the builder's temporary paths in its bytecode, is rebuilt.
BYTECODE_FORM = "pyc-unchecked-hash-image-paths"


def compile_tree(layer_root: Path, tree: Path) -> bool:
    """Compile every ``.py`` under ``tree`` (a folder of the layer being built at
    ``layer_root``) for this interpreter (the images' python3, which the layers' builders
    check); returns whether all compiled. The bytecode names each file by its path in the
    image, not the builder's temporary folder: tracebacks point at the files the container
    has, and the same sources give the same layer (and image digest) whichever folder
    built them. A file that does not compile (a package's test data, say) stays source
    only, as Python would leave it."""
    return bool(
        compileall.compile_dir(
            str(tree),
            ddir="/" + tree.relative_to(layer_root).as_posix(),
            quiet=2,
            workers=0,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
    )
