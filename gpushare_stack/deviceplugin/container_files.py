"""The files a container's isolation reads, written on the node for each container and
mounted by Allocate (docs/threat-model.md).

The shim takes its limits from ``/etc/gpushare/limits`` and is loaded through
``/etc/ld.so.preload``, both mounted read-only: a workload that unsets or raises its
environment variables changes nothing. Its processes share one accounting file,
``/run/gpushare/usage``, made here and bind-mounted, so the workload can neither remove
nor replace it (the shim opens no other, and refuses allocations without it). The
accounting is not the file's bytes but the kernel's byte-range locks on it (the ledger,
native/src/shim_usage.h): only the process holding a lock can give it back, and the file is
read-only to the container. The directories
live under ``--containers-dir`` on the node (``<pod uid>-<container index>``) and go
once their pod is gone.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from gpushare_stack import contract
from gpushare_stack.deviceplugin.environment import HostMount

log = logging.getLogger(__name__)

# What the accounting file holds: words for a person who finds it. The shim never reads
# them (its accounting is the locks on the file), so they may be overwritten at will.
USAGE_FILE_TEXT = (
    "gpushare ledger: each process of this container holds byte-range locks on this file, "
    "one per 64 KiB of device memory it uses; these bytes are not read.\n"
)


class ContainerFilesError(RuntimeError):
    """The node directory for the containers' files is missing or unusable."""


def prepared_usage_file() -> bytes:
    """A fresh accounting file (what it holds matters to no one: see USAGE_FILE_TEXT)."""
    return USAGE_FILE_TEXT.encode()


def _write(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    tmp.replace(path)


def limits_text(env: Mapping[str, str]) -> str:
    """The shim's variables of ``env`` as the limits file holds them, one per line."""
    names = [
        k
        for k in env
        if k.startswith(contract.ENV_LIMIT_ALL) or k in (contract.ENV_USAGE_FILE, contract.ENV_SHIM_FAULT)
    ]
    return "".join(f"{k}={env[k]}\n" for k in sorted(names))


def write_container_files(root: str, uid: str, container_index: int, env: Mapping[str, str]) -> list[HostMount]:
    """Write the container's limits, preload and accounting files under ``root`` (a node
    directory the plugin sees at the same path) and return the mounts that give them."""
    if not Path(root).is_dir():
        raise ContainerFilesError(
            f"gpushare: --containers-dir {root} does not exist in the device plugin's container; "
            "mount it from the node (hostPath) at the same path"
        )
    if not uid or "/" in uid or uid in (".", ".."):
        raise ContainerFilesError(f"gpushare: pod uid {uid!r} cannot name a directory")
    directory = Path(root) / f"{uid}-{container_index}"
    directory.mkdir(mode=0o755, exist_ok=True)
    _write(directory / "limits", limits_text(env), 0o444)
    _write(directory / "ld.so.preload", env[contract.ENV_LD_PRELOAD] + "\n", 0o444)
    usage = directory / "usage"
    if not usage.exists():  # a container restarted keeps its processes' accounting
        # 0444 and mounted read-only: the container's processes, whatever their user,
        # open it to lock it, and none can write to the node's disk through it.
        _write(usage, USAGE_FILE_TEXT, 0o444)
    return [
        HostMount(contract.CONTAINER_LIMITS_FILE, str(directory / "limits"), True),
        HostMount(contract.CONTAINER_PRELOAD_FILE, str(directory / "ld.so.preload"), True),
        HostMount(contract.CONTAINER_USAGE_FILE, str(usage), True),
    ]


def collect_garbage(root: str, live_uids: Iterable[str]) -> list[str]:
    """Remove the directories of pods that no longer exist on the node; returns them."""
    live = set(live_uids)
    removed = []
    base = Path(root)
    if not base.is_dir():
        return removed
    for entry in base.iterdir():
        uid, sep, index = entry.name.rpartition("-")
        if not sep or not index.isdigit() or uid in live or entry.is_symlink():
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry.name)
    if removed:
        log.info("removed the container files of %d pod(s) gone from the node", len(removed))
    return removed
