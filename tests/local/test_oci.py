"""The OCI archive writer produces a layout importers accept, deterministically."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from gpushare_conformance.images.oci import ImageConfig, layer_from_directory, manifest_digest_of, write_archive


def _blob(archive: tarfile.TarFile, digest: str) -> bytes:
    return archive.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}").read()


def test_archive_is_a_valid_oci_layout(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "usr" / "bin").mkdir(parents=True)
    (src / "usr" / "bin" / "hello").write_text("#!/bin/sh\necho hi\n")
    layer = layer_from_directory(src, tmp_path / "layer.tar")
    out = write_archive(
        [layer],
        ImageConfig(env={"A": "1"}, cmd=["/usr/bin/hello"]),
        ["localhost/x/y:dev", "localhost/x/z:dev"],
        tmp_path / "img.tar",
    )

    with tarfile.open(out) as archive:
        assert json.loads(archive.extractfile("oci-layout").read()) == {"imageLayoutVersion": "1.0.0"}
        index = json.loads(archive.extractfile("index.json").read())
        refs = [m["annotations"]["org.opencontainers.image.ref.name"] for m in index["manifests"]]
        assert refs == ["localhost/x/y:dev", "localhost/x/z:dev"]
        manifest_bytes = _blob(archive, index["manifests"][0]["digest"])
        assert "sha256:" + hashlib.sha256(manifest_bytes).hexdigest() == index["manifests"][0]["digest"]
        manifest = json.loads(manifest_bytes)
        config = json.loads(_blob(archive, manifest["config"]["digest"]))
        layer_bytes = _blob(archive, manifest["layers"][0]["digest"])
    assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]
    assert "sha256:" + hashlib.sha256(layer_bytes).hexdigest() == manifest["layers"][0]["digest"]
    assert config["config"]["Env"] == ["A=1"] and config["config"]["Cmd"] == ["/usr/bin/hello"]
    assert manifest_digest_of(out) == index["manifests"][0]["digest"].split(":", 1)[1]
    with tarfile.open(layer) as packed:
        member = packed.getmember("usr/bin/hello")
        assert (member.uid, member.gid, member.mtime) == (0, 0, 0)


def test_same_content_gives_same_digest(tmp_path: Path) -> None:
    digests = []
    for attempt in ("a", "b"):
        src = tmp_path / attempt / "src"
        src.mkdir(parents=True)
        (src / "f").write_text("same")
        layer = layer_from_directory(src, tmp_path / attempt / "layer.tar")
        out = write_archive([layer], ImageConfig(), ["localhost/t:1"], tmp_path / attempt / "img.tar")
        digests.append(manifest_digest_of(out))
    assert digests[0] == digests[1]


def test_archive_requires_a_name(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("x")
    layer = layer_from_directory(src, tmp_path / "layer.tar")
    with pytest.raises(ValueError, match="reference"):
        write_archive([layer], ImageConfig(), [], tmp_path / "img.tar")
