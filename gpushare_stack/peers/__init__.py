"""Flavors of the reference stack: the reference behaviour, and deployable variants
that behave like other GPU-sharing stacks (the peers), so the suite can be proven
against a peer's spelling and promises where the peer itself cannot be built.

``--flavor`` of ``gpushare-extender`` and ``gpushare-device-plugin`` picks one; the
shared code (extender state, binder, server; the device plugin) takes the flavor's
strategy object and asks it every question where the stacks differ.

- ``reference``: this project's stack (docs/design.md).
- ``gpushare-like``: the open-source Alibaba gpushare: ``aliyun.com/gpu-mem`` GiB on
  one card (the ``aliyun.com/gpu-count`` label is ignored), only the open
  ``ALIYUN_COM_GPU_MEM_*`` annotations, no isolation.
- ``hami-like``: HAMi: ``nvidia.com/gpu`` cards and ``nvidia.com/gpumem`` MiB per card,
  HAMi's node and pod annotations, and an isolation library that counts each
  process's CUDA context against the share, as HAMi-core does.
"""

from __future__ import annotations

from typing import Any

REFERENCE = "reference"
GPUSHARE_LIKE = "gpushare-like"
HAMI_LIKE = "hami-like"
FLAVORS = (REFERENCE, GPUSHARE_LIKE, HAMI_LIKE)

FLAVOR_HELP = (
    f"which stack to behave like: {REFERENCE} is this project's stack; {GPUSHARE_LIKE} the "
    "open-source Alibaba gpushare (aliyun.com/gpu-mem GiB on one card, the gpu-count label "
    f"ignored, no isolation); {HAMI_LIKE} HAMi (nvidia.com/gpu cards + nvidia.com/gpumem MiB "
    "per card, hami.io/* annotations, an isolation library that charges each process's CUDA "
    "context to the share) (default: %(default)s)"
)


def _check(name: str) -> None:
    if name not in FLAVORS:
        raise ValueError(f"gpushare: --flavor must be one of {FLAVORS}, got {name!r}")


def extender_flavor(name: str = REFERENCE) -> Any:
    """The extender's strategy object for flavor ``name``."""
    _check(name)
    if name == GPUSHARE_LIKE:
        from gpushare_stack.peers.gpushare_like import GpushareLikeExtender

        return GpushareLikeExtender()
    if name == HAMI_LIKE:
        from gpushare_stack.peers.hami_like import HamiLikeExtender

        return HamiLikeExtender()
    from gpushare_stack.peers.reference import ReferenceExtender

    return ReferenceExtender()


def device_plugin_flavor(name: str = REFERENCE) -> Any:
    """The device plugin's strategy object for flavor ``name``."""
    _check(name)
    if name == GPUSHARE_LIKE:
        from gpushare_stack.peers.gpushare_like import GpushareLikeDevicePlugin

        return GpushareLikeDevicePlugin()
    if name == HAMI_LIKE:
        from gpushare_stack.peers.hami_like import HamiLikeDevicePlugin

        return HamiLikeDevicePlugin()
    from gpushare_stack.peers.reference import ReferenceDevicePlugin

    return ReferenceDevicePlugin()
