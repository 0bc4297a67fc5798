"""The images' Python layers carry bytecode their read-only containers use as it is."""

from __future__ import annotations

import marshal
import os
import shutil
import subprocess
import sys
from pathlib import Path

from gpushare_conformance.images.bytecode import compile_tree

REPO = Path(__file__).resolve().parents[2]


def test_compiled_modules_are_used_whatever_the_layer_does_to_mtimes(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    module = package / "answer.py"
    module.write_text("VALUE = 'compiled'\n")
    (package / "broken.py").write_text("def (:\n")  # a file that does not compile stays source only
    assert compile_tree(tmp_path, package) is False
    # As a layer leaves it: every mtime 0, and (to tell which one Python ran) the source
    # changed after compiling; an unchecked-hash .pyc is taken as it is.
    module.write_text("VALUE = 'source'\n")
    for path in tmp_path.rglob("*"):
        os.utime(path, (0, 0))
    result = subprocess.run(
        [sys.executable, "-B", "-c", "import pkg.answer as a; print(a.VALUE, a.__cached__.endswith('.pyc'))"],
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["compiled", "True"], result.stdout
    assert not (package / "__pycache__" / f"broken.{sys.implementation.cache_tag}.pyc").exists()


def _layer_with_the_stack_doubles(root: Path) -> Path:
    """A layer holding a copy of a package of this project (real code: what a builder's
    state could change in its bytecode shows there)."""
    tree = root / "opt" / "app"
    shutil.copytree(REPO / "gpushare_doubles", tree / "gpushare_doubles", ignore=shutil.ignore_patterns("__pycache__"))
    return tree


def _compile_in_a_builder(preload: str, seed: str, layer_root: Path, tree: Path) -> None:
    """compile_tree called by a builder that imported ``preload`` first, its hash seed ``seed``."""
    code = (
        f"{preload}; import sys; from pathlib import Path; "
        "from gpushare_conformance.images.bytecode import compile_tree; "
        "sys.exit(0 if compile_tree(Path(sys.argv[1]), Path(sys.argv[2])) else 1)"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(layer_root), str(tree)],
        env={**os.environ, "PYTHONHASHSEED": seed},
        check=True,
    )


def test_bytecode_is_the_same_from_any_builder_and_folder_and_names_the_image_path(tmp_path: Path) -> None:
    """Two builds of the same sources, in different temporary folders, by builders in
    different states (one has imported the Kubernetes client, gRPC and pytest and interned
    strings, as a test session has; different hash seeds), give the same bytes, so the same image digest (a
    changed digest restarts the local cluster's stack onto it); and the code is named by
    its path in the image, not the builder's folder."""
    first = _layer_with_the_stack_doubles(tmp_path / "build-a")
    second = _layer_with_the_stack_doubles(tmp_path / "build-b")
    _compile_in_a_builder("pass", "1", tmp_path / "build-a", first)
    # A process that has imported much (a test session) has interned strings a fresh one
    # has not, and marshal writes an interned string with another type code: here every
    # printable one-character string (a "]" of faults.py changed the digest that way).
    busy = "import sys, kubernetes.client, grpc, pytest, yaml; [sys.intern(chr(c)) for c in range(32, 127)]"
    _compile_in_a_builder(busy, "2", tmp_path / "build-b", second)
    tag = sys.implementation.cache_tag
    compiled = sorted(p.relative_to(first) for p in first.rglob(f"*.{tag}.pyc"))
    assert len(compiled) > 3, compiled
    differ = [str(p) for p in compiled if (first / p).read_bytes() != (second / p).read_bytes()]
    assert not differ, f"bytecode differs between two builds of the same sources: {differ}"
    faults = first / "gpushare_doubles" / "__pycache__" / f"faults.{tag}.pyc"
    code = marshal.loads(faults.read_bytes()[16:])  # after the 16-byte header
    assert code.co_filename == "/opt/app/gpushare_doubles/faults.py"
