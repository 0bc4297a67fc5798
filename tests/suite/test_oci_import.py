"""An archive import that meets containerd's garbage collector is tried once more
(images/oci.py): a snapshot ctr found a moment before can be collected meanwhile when an
image was removed just before (containerd issues 2382 and 3787); any other failure, or
the same one twice, fails with ctr's words."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from gpushare_conformance.images.oci import ImageConfig, import_archives, layer_from_directory, write_archive

REF = "localhost/gpushare-conformance/import-check:dev"
COLLECTED = (
    'ctr: failed to prepare extraction snapshot "extract-1 sha256:55": '
    "parent snapshot sha256:a111 does not exist: not found"
)


def _archive(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "version.txt").write_text("A")
    layer = layer_from_directory(tree, tmp_path / "layer.tar")
    return write_archive([layer], ImageConfig(cmd=["/version.txt"]), [REF], tmp_path / "image.tar")


def _fake_ctr(tmp_path: Path, failures: list[str]) -> list[str]:
    """A ctr whose imports fail with ``failures`` in turn, then succeed; it lists no image."""
    for i, text in enumerate(failures):
        (tmp_path / f"failure-{i}").write_text(text)
    script = tmp_path / "ctr"
    script.write_text(
        f"""#!/bin/sh
cd {tmp_path}
case "$2" in
  ls) echo "REF TYPE DIGEST"; exit 0 ;;
esac
echo "$@" >> calls
n=$(wc -l < calls)
f="failure-$((n - 1))"
if [ -f "$f" ]; then cat "$f"; exit 1; fi
echo "unpacking {REF}...done"
"""
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return [str(script)]


def _imports(tmp_path: Path) -> int:
    calls = tmp_path / "calls"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_a_snapshot_collected_during_the_import_is_extracted_again(tmp_path):
    said: list[str] = []
    import_archives(_fake_ctr(tmp_path, [COLLECTED]), [_archive(tmp_path)], said.append)
    assert _imports(tmp_path) == 2
    assert any("parent snapshot sha256:a111 does not exist: not found; again" in s for s in said), said


def test_the_same_failure_twice_fails_with_ctrs_words(tmp_path):
    with pytest.raises(RuntimeError, match="parent snapshot sha256:a111 does not exist"):
        import_archives(_fake_ctr(tmp_path, [COLLECTED, COLLECTED]), [_archive(tmp_path)], print)
    assert _imports(tmp_path) == 2


def test_any_other_failure_is_not_tried_again(tmp_path):
    with pytest.raises(RuntimeError, match="archive is truncated"):
        import_archives(_fake_ctr(tmp_path, ["ctr: archive is truncated"]), [_archive(tmp_path)], print)
    assert _imports(tmp_path) == 1
