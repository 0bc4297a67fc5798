"""Write OCI image archives from layer tarballs, without a container engine.

An OCI archive is a tar of an image layout (`oci-layout`, `index.json`, `blobs/`), which
`ctr images import` and `kind load image-archive` accept. Layers are stored
uncompressed: the archive is imported on the same machine, so compression buys nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"


def sha256_file(path: Path) -> str:
    """The file's sha256, remembered beside it (keyed by size and mtime): layers are big."""
    stat = path.stat()
    memo = path.with_name(path.name + ".sha256")
    key = f"{stat.st_size}:{stat.st_mtime_ns}"
    try:
        saved_key, saved_digest = memo.read_text().split()
        if saved_key == key:
            return saved_digest
    except (FileNotFoundError, ValueError):
        pass
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    try:
        memo.write_text(f"{key} {digest.hexdigest()}")
    except OSError:
        pass
    return digest.hexdigest()


@dataclass
class ImageConfig:
    """The runtime defaults an image carries (the `config` of the OCI image config)."""

    env: dict[str, str] = field(default_factory=dict)
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    working_dir: str = "/"
    labels: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        config: dict = {"Env": [f"{k}={v}" for k, v in self.env.items()], "WorkingDir": self.working_dir}
        if self.entrypoint is not None:
            config["Entrypoint"] = self.entrypoint
        if self.cmd is not None:
            config["Cmd"] = self.cmd
        if self.labels:
            config["Labels"] = self.labels
        return config


def write_archive(layers: list[Path], config: ImageConfig, ref_names: list[str], out: Path) -> Path:
    """Write an OCI archive holding one image made of `layers` (uncompressed tars).

    `ref_names` are full references (`localhost/name:tag`); each becomes an index entry
    with the `org.opencontainers.image.ref.name` annotation that importers read.
    """
    if not ref_names:
        raise ValueError("write_archive: at least one image reference is required")
    layer_digests = [sha256_file(layer) for layer in layers]
    image_config = {
        # A fixed date keeps the digest a function of the content alone, so an
        # unchanged image is recognised and not imported again.
        "created": "2026-01-01T00:00:00Z",
        "architecture": "amd64",
        "os": "linux",
        "config": config.to_json(),
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in layer_digests]},
        "history": [{"created_by": f"gpushare-conformance layer {layer.name}"} for layer in layers],
    }
    config_bytes = json.dumps(image_config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": {
            "mediaType": MEDIA_CONFIG,
            "digest": "sha256:" + hashlib.sha256(config_bytes).hexdigest(),
            "size": len(config_bytes),
        },
        "layers": [
            {"mediaType": MEDIA_LAYER, "digest": f"sha256:{d}", "size": layer.stat().st_size}
            for layer, d in zip(layers, layer_digests)
        ],
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
    manifest_digest = hashlib.sha256(manifest_bytes).hexdigest()
    index = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [
            {
                "mediaType": MEDIA_MANIFEST,
                "digest": f"sha256:{manifest_digest}",
                "size": len(manifest_bytes),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {"org.opencontainers.image.ref.name": ref, "io.containerd.image.name": ref},
            }
            for ref in ref_names
        ],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    stamp = out.with_name(out.name + ".manifest")
    if out.exists() and stamp.exists() and stamp.read_text() == manifest_digest:
        return out
    # A name of this process's own: two builds into one cache never write one file.
    tmp = out.with_suffix(f"{out.suffix}.{os.getpid()}.tmp")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as archive:
        _add_bytes(archive, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        _add_bytes(archive, "index.json", json.dumps(index, sort_keys=True).encode())
        _add_bytes(archive, f"blobs/sha256/{manifest_digest}", manifest_bytes)
        _add_bytes(archive, "blobs/sha256/" + hashlib.sha256(config_bytes).hexdigest(), config_bytes)
        seen: set[str] = set()
        for layer, digest in zip(layers, layer_digests):
            if digest not in seen:
                seen.add(digest)
                archive.add(str(layer), arcname=f"blobs/sha256/{digest}")
    tmp.replace(out)
    stamp.write_text(manifest_digest)
    return out


def manifest_digest_of(archive: Path) -> str | None:
    """The manifest digest recorded when `archive` was written, if known."""
    stamp = archive.with_name(archive.name + ".manifest")
    return stamp.read_text().strip() if stamp.exists() else None


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    archive.addfile(info, io.BytesIO(data))


def layer_from_directory(source: Path, out: Path) -> Path:
    """Pack a directory into an uncompressed layer tar (root-owned, paths relative)."""

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mtime = 0  # same content, same digest
        return info

    out.parent.mkdir(parents=True, exist_ok=True)
    # A name of this process's own: two builds into one cache never write one file.
    tmp = out.with_suffix(f"{out.suffix}.{os.getpid()}.tmp")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as archive:
        for child in sorted(source.iterdir()):
            archive.add(str(child), arcname=child.name, filter=as_root)
    tmp.replace(out)
    return out


def archive_refs(archive: Path) -> list[str]:
    """The image references an archive's index names."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        index = json.loads(member.read()) if member else {}
    return [
        m.get("annotations", {}).get("io.containerd.image.name")
        or m.get("annotations", {}).get("org.opencontainers.image.ref.name")
        for m in index.get("manifests", [])
        if m.get("annotations")
    ]


def ctr_image_digests(ctr: list[str]) -> dict[str, str]:
    """Reference -> manifest digest of every image in a containerd namespace (`ctr images ls`)."""
    listed = subprocess.run([*ctr, "images", "ls"], stdout=subprocess.PIPE, text=True, check=True).stdout
    digests = {}
    for line in listed.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3 and fields[2].startswith("sha256:"):
            digests[fields[0]] = fields[2]
    return digests


# What ctr says when a snapshot it found a moment before was collected meanwhile.
SNAPSHOT_COLLECTED = re.compile(r"parent snapshot \S+ does not exist: not found|missing parent \S+ bucket: not found")


def import_archives(ctr: list[str], archives: list[Path], progress=print) -> dict[str, str]:
    """Import each archive unless every reference it names already points at its manifest.

    Having the manifest somewhere in the store is not enough: after building A, then B,
    then A again, A's manifest is still stored while the tag points at B, so the
    check is per reference. Returns reference -> digest now tagged.
    """
    current = ctr_image_digests(ctr)
    for archive in archives:
        digest = manifest_digest_of(archive)
        refs = archive_refs(archive)
        if digest and refs and all(current.get(ref) == f"sha256:{digest}" for ref in refs):
            continue
        progress(f"importing {archive.name} ({', '.join(refs)} -> sha256:{(digest or '?')[:12]})")
        result = _ctr_import(ctr, archive)
        collected = SNAPSHOT_COLLECTED.search(result.stdout) if result.returncode != 0 else None
        if collected:
            # containerd's garbage collector removed a layer's snapshot between the
            # import's look and its use (an image removed just before, as a test that
            # pulls and forgets one does; containerd issues 2382 and 3787): the second
            # import extracts that layer again.
            progress(f"ctr images import {archive.name}: {collected.group(0)}; again")
            result = _ctr_import(ctr, archive)
        if result.returncode != 0:
            raise RuntimeError(f"ctr images import {archive} failed: {result.stdout.strip()}")
    return ctr_image_digests(ctr)


def _ctr_import(ctr: list[str], archive: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*ctr, "images", "import", "--no-unpack=false", str(archive)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
