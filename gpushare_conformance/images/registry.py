"""The suite's images in a registry: the names they take there, and pushing them.

`images build` names every image ``localhost/gpushare-conformance/<name>:<tag>``, which
the local and kind providers import into their nodes' containerd. A cluster the suite
did not start cannot be given archives, so its nodes pull the same images from a
registry: ``REGISTRY/gpushare-conformance/<name>:<tag>``. This module is the one place
that maps a local name to its registry name (checks' pods and the stack's manifests
alike) and the only code that talks to a registry (through skopeo, which copies an
OCI archive to a registry without a daemon).
"""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
from collections.abc import Callable, Iterable
from pathlib import Path

LOCAL_PREFIX = "localhost/gpushare-conformance/"
REF_ANNOTATION = "org.opencontainers.image.ref.name"

# The distribution reference grammar (github.com/distribution/reference), in short: a
# host (DNS name, IPv4 or [IPv6]) with an optional port, then lower-case path components.
_HOST = (
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])"
)
_PORT = r"(?::[0-9]{1,5})?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REGISTRY = re.compile(rf"{_HOST}{_PORT}(?:/{_COMPONENT})*")
# In manifests: an ``image:`` field naming one of the suite's images.
_IMAGE_FIELD = re.compile(r"""^(\s*(?:-\s+)?image:\s*["']?)""" + re.escape(LOCAL_PREFIX), re.MULTILINE)

Progress = Callable[[str], None]
Runner = Callable[..., subprocess.CompletedProcess]


class RegistryError(ValueError):
    """A bad registry name, an archive without names, or a failed push; the message says which."""


def check_registry(registry: str, field: str = "REGISTRY") -> str:
    """``registry`` without a trailing slash, or a ``RegistryError`` naming ``field`` and
    the value: a host[:port] and optional path (``registry.example.com:5000/team``), no
    scheme and no tag, so that ``REGISTRY/gpushare-conformance/stack:dev`` is a valid ref."""
    value = registry.strip().rstrip("/")
    if "://" in value:
        raise RegistryError(f"{field}: {registry!r} has a scheme; give host[:port][/path], without http:// or https://")
    if not value or not _REGISTRY.fullmatch(value):
        raise RegistryError(
            f"{field}: {registry!r} is not a registry name; expected host[:port][/path] with a lower-case path "
            "(e.g. registry.example.com:5000/team or 127.0.0.1:5000)"
        )
    port = value.split("/", 1)[0].rpartition("]")[2].partition(":")[2]
    if port and not 0 < int(port) < 65536:
        raise RegistryError(f"{field}: {registry!r} has port {port}, outside 1-65535")
    if "/" not in value and "." not in value and ":" not in value and value != "localhost":
        # Docker's rule: a first component without '.' or ':' is a path, not a host.
        raise RegistryError(
            f"{field}: {registry!r} reads as a Docker Hub path, not a registry host; "
            "name the host (docker.io/{registry}) or add its port"
        )
    return value


def registry_ref(ref: str, registry: str | None) -> str:
    """The name ``ref`` has in ``registry`` (``localhost/gpushare-conformance/stack:dev``
    -> ``REGISTRY/gpushare-conformance/stack:dev``); ``ref`` itself when ``registry`` is
    None or the image is not one of the suite's (the seed's image stays where it is)."""
    if registry is None or not ref.startswith(LOCAL_PREFIX):
        return ref
    return f"{check_registry(registry)}/{ref.removeprefix('localhost/')}"


def rewrite_manifests(text: str, registry: str | None) -> str:
    """Rendered manifests (``kubectl kustomize``) with every ``image:`` field that names
    one of the suite's images moved to ``registry``; ``text`` unchanged when None."""
    if registry is None:
        return text
    target = check_registry(registry) + "/gpushare-conformance/"
    return _IMAGE_FIELD.sub(lambda m: m.group(1) + target, text)


def archive_refs(archive: Path) -> list[str]:
    """The names an OCI archive carries (each index entry's ref.name annotation)."""
    try:
        with tarfile.open(archive) as tar:
            member = tar.extractfile("index.json")
            index = json.load(member) if member else {}
    except (OSError, KeyError, tarfile.TarError, json.JSONDecodeError) as exc:
        raise RegistryError(f"{archive}: not an OCI archive with an index.json ({exc})") from None
    refs = [(m.get("annotations") or {}).get(REF_ANNOTATION) for m in index.get("manifests") or []]
    named = [r for r in refs if r]
    if not named:
        raise RegistryError(f"{archive}: no image in it carries a {REF_ANNOTATION} annotation")
    return named


def find_archives(directory: Path) -> list[Path]:
    """The archives ``images build`` wrote into ``directory`` (``*.oci.tar``)."""
    archives = sorted(directory.glob("*.oci.tar"))
    if not archives:
        raise RegistryError(f"--out: no *.oci.tar in {directory}; run `gpushare-conformance images build` first")
    return archives


def push(
    archives: Iterable[Path],
    registry: str,
    tls_verify: bool = True,
    progress: Progress = print,
    skopeo: str = "skopeo",
    run: Runner = subprocess.run,
) -> list[str]:
    """Copy every image of ``archives`` to ``registry`` under its registry name (``skopeo
    copy oci-archive:PATH:REF docker://...``); returns the names pushed. ``tls_verify``
    False allows a plain-HTTP or self-signed registry."""
    registry = check_registry(registry)
    pushed = []
    for archive in archives:
        for ref in archive_refs(archive):
            target = registry_ref(ref, registry)
            progress(f"images: pushing {ref} -> {target}")
            argv = [
                skopeo,
                "copy",
                "--quiet",
                f"--dest-tls-verify={'true' if tls_verify else 'false'}",
                f"oci-archive:{archive}:{ref}",
                f"docker://{target}",
            ]
            try:
                result = run(argv, capture_output=True, text=True, check=False)
            except FileNotFoundError:
                raise RegistryError(f"{skopeo} not found: install skopeo (ci/host-packages.txt lists it)") from None
            if result.returncode != 0:
                raise RegistryError(
                    f"pushing {ref} to {target} failed (skopeo exit {result.returncode}): {result.stderr.strip()}"
                )
            pushed.append(target)
    return pushed
