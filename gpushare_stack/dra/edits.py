"""What prepare leaves on the node for each container of a pod using the driver's claims.

The container gets exactly what the device plugin's Allocate gives a container (the
same shim, limits and accounting files, the cards as ``/dev/null`` mounts for a node
whose toolkit reads cards from mounts): ``deviceplugin.environment`` and
``deviceplugin.container_files`` make them. containerd 1.6 drops the CDI device names
the kubelet hands it, so prepare writes each container's edits (environment and
mounts) to ``<dra dir>/<pod uid>/<container name>.json``; the node's container toolkit
applies them when the container is created, finding them by the pod UID and
container name containerd writes into every OCI spec (docs/dra.md).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from gpushare_stack import contract
from gpushare_stack.deviceplugin.container_files import write_container_files
from gpushare_stack.deviceplugin.discovery import GpuCard
from gpushare_stack.deviceplugin.environment import container_environment, device_list_mounts, without_shim
from gpushare_stack.dra.containers import container_shares
from gpushare_stack.dra.shares import ClaimError, Share

log = logging.getLogger(__name__)

DRA_DIR = "/var/run/gpushare-dra"


class PodSource(Protocol):
    def pod(self, namespace: str, name: str) -> dict[str, Any]: ...


def container_edits(
    pod_uid: str,
    container_index: int,
    shares: Sequence[Share],
    cards: Mapping[int, GpuCard],
    native_host_dir: str,
    containers_dir: str,
    isolation: bool = True,
) -> dict[str, Any]:
    """The environment and mounts of one container holding ``shares`` (``isolation``
    False: the shim and its limits left out, ``dra/policy.py``)."""
    missing = [s.card_index for s in shares if s.card_index not in cards]
    if missing:
        raise ClaimError(f"cards {missing} of the claim's shares are not on this node")
    indices = tuple(s.card_index for s in shares)
    env, mounts = container_environment(
        indices,
        [s.memory_gib for s in shares],
        sum(s.memory_gib for s in shares),
        card_gib=cards[indices[0]].memory_gib,
        native_host_dir=native_host_dir,
    )
    if isolation:
        env[contract.ENV_USAGE_FILE] = contract.CONTAINER_USAGE_FILE
        files = write_container_files(containers_dir, pod_uid, container_index, env)
    else:  # no shim, no limits, no container files
        env, files = without_shim(env), []
    mounts = [*mounts, *files, *device_list_mounts(env[contract.ENV_VISIBLE])]
    return {
        "env": dict(sorted(env.items())),
        "mounts": [
            {"containerPath": m.container_path, "hostPath": m.host_path, "readOnly": m.read_only} for m in mounts
        ],
    }


def edits_path(dra_dir: str, pod_uid: str, container: str) -> Path:
    for what, value in (("pod uid", pod_uid), ("container name", container)):
        if not value or "/" in value or value in (".", ".."):
            raise ClaimError(f"{what} {value!r} cannot name a file")
    return Path(dra_dir) / pod_uid / f"{container}.json"


def write_edits(dra_dir: str, pod_uid: str, container: str, edits: Mapping[str, Any]) -> Path:
    """Write one container's edits (read-only, replaced in one rename, never through a link)."""
    path = edits_path(dra_dir, pod_uid, container)
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
    with os.fdopen(fd, "w") as f:
        json.dump(edits, f, indent=1, sort_keys=True)
    tmp.replace(path)
    return path


class Preparer:
    """``DraPlugin``'s prepare and unprepare steps: the edits of each container of the
    pod the claim is reserved for, and their removal."""

    def __init__(
        self,
        pods: PodSource,
        cards: Callable[[], Sequence[GpuCard]],
        native_host_dir: str = contract.HOST_NATIVE_DIR,
        containers_dir: str = contract.HOST_CONTAINERS_DIR,
        dra_dir: str = DRA_DIR,
        isolation: bool = True,
    ) -> None:
        self.pods = pods
        self.cards = cards
        self.native_host_dir = native_host_dir
        self.containers_dir = containers_dir
        self.dra_dir = dra_dir
        self.isolation = isolation  # False only in a variant (dra/policy.py)

    def prepare(self, claim: Mapping[str, Any], shares: Sequence[Share]) -> dict[str, Path]:
        meta = claim.get("metadata") or {}
        claim_uid = str(meta.get("uid"))
        users = [r for r in (claim.get("status") or {}).get("reservedFor") or [] if r.get("resource") == "pods"]
        if len(users) != 1:
            raise ClaimError(
                f"claim {meta.get('namespace')}/{meta.get('name')} is reserved for {len(users)} pods "
                "(status.reservedFor); a share serves one pod"
            )
        pod = self.pods.pod(str(meta.get("namespace")), str(users[0].get("name")))
        pod_uid = str((pod.get("metadata") or {}).get("uid"))
        if pod_uid != users[0].get("uid"):
            raise ClaimError(
                f"pod {users[0].get('name')} has UID {pod_uid}, the claim is reserved for {users[0].get('uid')}"
            )
        by_container = container_shares(pod, str(meta.get("name")), shares)
        index_of = {c.get("name"): i for i, c in enumerate((pod.get("spec") or {}).get("containers") or [])}
        for container in by_container:
            other = _claim_of(edits_path(self.dra_dir, pod_uid, container))
            if other not in (None, claim_uid):
                # One limits file, one preload and one budget per container: a second
                # claim would replace the first's cards, not add to them.
                raise ClaimError(
                    f"container {container} of pod {meta.get('namespace')}/{users[0].get('name')} already takes "
                    f"its cards from claim {other}; a container uses one claim of this driver"
                )
        cards = {c.index: c for c in self.cards()}
        written = {}
        for container, used in by_container.items():
            edits = container_edits(
                pod_uid,
                index_of[container],
                used,
                cards,
                self.native_host_dir,
                self.containers_dir,
                self.isolation,
            )
            # Who the edits are for, so unprepare finds them after a restart of the plugin.
            edits.update(claim=claim_uid, containerIndex=index_of[container])
            written[container] = write_edits(self.dra_dir, pod_uid, container, edits)
        return written

    def unprepare(self, claim_uid: str) -> list[Path]:
        """Remove the edits and container files the claim's prepare wrote (found on disk,
        so a restarted plugin removes what its predecessor wrote); returns them."""
        removed: list[Path] = []
        for path in sorted(Path(self.dra_dir).glob("*/*.json")):
            if _claim_of(path) != claim_uid:
                continue
            index = _read_edits(path).get("containerIndex")
            pod_dir = path.parent
            path.unlink(missing_ok=True)
            removed.append(path)
            if isinstance(index, int) and not isinstance(index, bool):
                files = Path(self.containers_dir) / f"{pod_dir.name}-{index}"
                shutil.rmtree(files, ignore_errors=True)
                removed.append(files)
            try:
                pod_dir.rmdir()  # only once no container of the pod has edits left
            except OSError:
                pass
        return removed


def _read_edits(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _claim_of(path: Path) -> str | None:
    """The claim UID an edits file was written for (None: no such file)."""
    if not path.is_file():
        return None
    return str(_read_edits(path).get("claim"))
