"""What a container gets from Allocate: env and mounts (docs/design.md).

The same on mock and real nodes: the cards, the limits and the shim. The driver
(libnvidia-ml, libcuda, nvidia-smi) is the node's business: its container toolkit adds
it to every container whose NVIDIA_VISIBLE_DEVICES asks for cards, on a mock node the
mock driver (native/toolkit/gpushare-mock-runtime), so Allocate mounts no driver file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpushare_stack import contract


@dataclass(frozen=True)
class HostMount:
    container_path: str
    host_path: str
    read_only: bool = True


def container_environment(
    cards: tuple[int, ...],
    per_card_gib: int | Sequence[int],
    pod_total_gib: int,
    card_gib: int,
    native_host_dir: str = contract.HOST_NATIVE_DIR,
) -> tuple[dict[str, str], list[HostMount]]:
    """Env and mounts for a container holding ``per_card_gib`` on each of ``cards``
    (physical indices; the container sees them as 0..M-1 in this order): one figure for
    every card, or one per card as the allocation annotation gives them.
    ``card_gib`` is the card size for ALIYUN_COM_GPU_MEM_DEV."""
    if not cards:
        raise ValueError("gpushare: a container needs at least one card")
    shares = [per_card_gib] * len(cards) if isinstance(per_card_gib, int) else list(per_card_gib)
    if len(shares) != len(cards):
        raise ValueError(f"gpushare: per_card_gib has {len(shares)} figures {shares} for {len(cards)} cards {cards}")
    indices = ",".join(str(i) for i in cards)
    env = {
        contract.ENV_VISIBLE: indices,
        contract.ENV_IDX: indices,
        contract.ENV_POD: str(pod_total_gib),
        contract.ENV_CONTAINER: str(shares[0]),
        contract.ENV_DEV: str(card_gib),
        contract.ENV_LD_PRELOAD: contract.SHIM_PATH,
    }
    for i, share in enumerate(shares):
        env[f"{contract.ENV_LIMIT_PREFIX}{i}"] = f"{share}GiB"
    native = native_host_dir.rstrip("/")
    return env, [HostMount(contract.CONTAINER_NATIVE_DIR, native)]


# How Allocate names a container's cards to the node's container toolkit (the NVIDIA
# device plugin's DEVICE_LIST_STRATEGY): in NVIDIA_VISIBLE_DEVICES only, or also as one
# mount per card under the toolkit's DEVICE_MOUNTS_ROOT. Only a mount comes from the
# kubelet alone: a toolkit that reads cards from mounts and ignores an unprivileged
# container's own NVIDIA_VISIBLE_DEVICES gives no card to a pod that asked none.
ENVVAR = "envvar"
VOLUME_MOUNTS = "volume-mounts"
DEVICE_LIST_STRATEGIES = (ENVVAR, VOLUME_MOUNTS)
DEVICE_MOUNTS_ROOT = "/var/run/nvidia-container-devices"


def device_list_mounts(visible: str) -> list[HostMount]:
    """One mount per card of ``visible`` (a NVIDIA_VISIBLE_DEVICES value), in its order,
    from /dev/null: the toolkit reads the names, not the files."""
    return [
        HostMount(f"{DEVICE_MOUNTS_ROOT}/{name.strip()}", "/dev/null") for name in visible.split(",") if name.strip()
    ]


def without_shim(env: dict[str, str]) -> dict[str, str]:
    """``env`` minus the isolation shim's preload and its limits: what a container of a
    stack that isolates nothing is given (the DRA driver's ``isolation=False`` seam)."""
    return {
        key: value
        for key, value in env.items()
        if key != contract.ENV_LD_PRELOAD and not key.startswith(contract.ENV_LIMIT_ALL)
    }
