"""The images' Python layers carry bytecode their read-only containers use as it is."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from pathlib import Path

from gpushare_conformance.images.bytecode import compile_tree


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


def _layer_with_a_module(root: Path) -> Path:
    package = root / "opt" / "app" / "pkg"
    package.mkdir(parents=True)
    (package / "mod.py").write_text("def fails():\n    raise RuntimeError('where')\n")
    return root / "opt" / "app"


def test_bytecode_is_the_same_from_any_build_folder_and_names_the_image_path(tmp_path: Path) -> None:
    """Two builds of the same sources in different temporary folders give the same bytes,
    so the same image digest (a changed digest restarts the local cluster's stack onto
    it), and the code is named by its path in the image, not the builder's folder."""
    first, second = _layer_with_a_module(tmp_path / "build-a"), _layer_with_a_module(tmp_path / "build-b")
    assert compile_tree(tmp_path / "build-a", first) and compile_tree(tmp_path / "build-b", second)
    pyc = Path("pkg") / "__pycache__" / f"mod.{sys.implementation.cache_tag}.pyc"
    assert (first / pyc).read_bytes() == (second / pyc).read_bytes()
    code = marshal.loads((first / pyc).read_bytes()[16:])  # after the 16-byte header
    assert code.co_filename == "/opt/app/pkg/mod.py"
