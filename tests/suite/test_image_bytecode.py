"""The images' Python layers carry bytecode their read-only containers use as it is."""

from __future__ import annotations

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
    assert compile_tree(tmp_path) is False
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
