"""The environment the device plugin gives a container, reproduced on this machine.

``sandbox_env`` returns exactly the variables a container gets for a share of
``mem_per_card_mib`` on each of the ``visible`` physical cards (docs/design.md, "Shim
environment" and "Paths inside a container"), pointing at the local native build
instead of ``/usr/local/gpushare``.  Running a command with it shows the GPU view a
pod would see, without a cluster.
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpushare_conformance import native


class SandboxError(ValueError):
    """Bad sandbox input (inventory, visible list, share size)."""


@dataclass(frozen=True)
class MockGpu:
    name: str
    memory_mib: int


@dataclass(frozen=True)
class Inventory:
    path: Path
    driver_version: str
    cuda_version: str
    gpus: tuple[MockGpu, ...]


def load_inventory(path: str | os.PathLike[str]) -> Inventory:
    """Read the mock inventory with the same rules as the mock libraries (YAML in any
    style, per-model defaults), so the sandbox refuses exactly what the mocks refuse."""
    from gpushare_conformance.fixtures.inventory import InventoryError
    from gpushare_conformance.fixtures.inventory import load_inventory as parse

    p = Path(path)
    try:
        data = parse(p)
    except InventoryError as exc:
        raise SandboxError(str(exc)) from exc
    gpus = tuple(MockGpu(name=str(g["name"]), memory_mib=int(g["memory_mib"])) for g in data["gpus"])
    return Inventory(p.resolve(), str(data["driver_version"]), str(data.get("cuda_version", "")), gpus)


_SIZE = re.compile(r"^(\d+)\s*(B|KiB|MiB|GiB|TiB)$")
_UNIT_MIB = {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "TiB": 1024 * 1024}


def parse_mem_size(text: str, what: str = "--mem-per-card") -> int:
    """'4GiB' / '4096MiB' -> MiB (whole MiB only), with an error naming the value."""
    m = _SIZE.match(text.strip())
    if not m or m.group(2) == "B":
        raise SandboxError(f"{what}={text!r}: expected an integer with unit KiB, MiB, GiB or TiB (e.g. 4GiB)")
    value = int(m.group(1)) * _UNIT_MIB[m.group(2)]
    if value != int(value) or value <= 0:
        raise SandboxError(f"{what}={text!r}: must be a positive whole number of MiB")
    return int(value)


def parse_visible(text: str) -> list[int]:
    """'1,2' -> [1, 2]."""
    try:
        out = [int(t) for t in text.split(",")]
    except ValueError:
        raise SandboxError(f"--visible={text!r}: expected a comma list of card indices, e.g. 1,2") from None
    if not out or any(i < 0 for i in out):
        raise SandboxError(f"--visible={text!r}: expected non-negative card indices")
    return out


def sandbox_env(
    inventory: Inventory | str | os.PathLike[str],
    visible: Sequence[int],
    mem_per_card_mib: int,
    isolation: bool = True,
    *,
    base_env: Mapping[str, str] | None = None,
    usage_file: str | os.PathLike[str] | None = None,
    native_root: Path | None = None,
) -> dict[str, str]:
    """Environment for a container holding ``mem_per_card_mib`` on each card in ``visible``.

    ``base_env`` (default: none) is extended, never mutated.  Without ``isolation`` the
    shim and the limit variables are left out: the negative control, where the physical
    card size shows.  Each call gets its own accounting file unless ``usage_file`` is
    given, as each container has its own ``/tmp``.
    """
    inv = inventory if isinstance(inventory, Inventory) else load_inventory(inventory)
    cards = list(visible)
    if not cards:
        raise SandboxError("visible: at least one card is required")
    if len(set(cards)) != len(cards):
        raise SandboxError(f"visible={cards}: a card is listed twice")
    for i in cards:
        if i >= len(inv.gpus):
            raise SandboxError(
                f"visible card {i}: the inventory {inv.path} has {len(inv.gpus)} cards (0..{len(inv.gpus) - 1})"
            )
    if mem_per_card_mib <= 0:
        raise SandboxError(f"mem_per_card_mib={mem_per_card_mib}: must be positive")
    for i in cards:
        if mem_per_card_mib > inv.gpus[i].memory_mib:
            raise SandboxError(
                f"mem_per_card_mib={mem_per_card_mib}: card {i} ({inv.gpus[i].name}) has only {inv.gpus[i].memory_mib} MiB"
            )

    root = native_root or native.native_dir()
    env = dict(base_env or {})
    prior_ld = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = str(native.mock_lib_dir(root)) + (f":{prior_ld}" if prior_ld else "")
    prior_path = env.get("PATH", os.defpath)
    env["PATH"] = f"{native.bin_dir(root)}:{prior_path}"
    env["GPUSHARE_MOCK_INVENTORY"] = str(inv.path)
    env["NVIDIA_VISIBLE_DEVICES"] = ",".join(str(i) for i in cards)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    for key in [k for k in env if k.startswith("GPUSHARE_MEMORY_LIMIT")]:
        del env[key]

    env["ALIYUN_COM_GPU_MEM_IDX"] = ",".join(str(i) for i in cards)
    if mem_per_card_mib % 1024 == 0:  # the Alibaba variables count whole GiB
        per_card_gib = mem_per_card_mib // 1024
        env["ALIYUN_COM_GPU_MEM_CONTAINER"] = str(per_card_gib)
        env["ALIYUN_COM_GPU_MEM_POD"] = str(per_card_gib * len(cards))
        env["ALIYUN_COM_GPU_MEM_DEV"] = str(min(inv.gpus[i].memory_mib for i in cards) // 1024)

    if isolation:
        env["LD_PRELOAD"] = str(native.shim_path(root))
        for container_index in range(len(cards)):
            env[f"GPUSHARE_MEMORY_LIMIT_{container_index}"] = f"{mem_per_card_mib}MiB"
        if usage_file is None:
            usage_file = Path(tempfile.gettempdir()) / f"gpushare-sandbox-{uuid.uuid4().hex}.usage"
        env["GPUSHARE_USAGE_FILE"] = str(usage_file)
    else:
        env.pop("LD_PRELOAD", None)
        env.pop("GPUSHARE_USAGE_FILE", None)
    return env
