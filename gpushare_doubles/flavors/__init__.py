"""Flavors of the reference stack that behave like other GPU-sharing stacks (the peers),
so the suite can be proven against a peer's spelling and promises where the peer itself
cannot be built. Test doubles: never part of the shipped stack.

``--flavor`` of ``gpushare-extender`` and ``gpushare-device-plugin`` picks one (through
``gpushare_stack/variants.py`` and ``gpushare_doubles/registry.py``); each flavor
subclasses the stack's reference policy (``extender/policy.py``,
``deviceplugin/policy.py``) and overrides only where its stack differs. This module
holds the names only, so the flavors' modules can import them without a circle.

- ``reference``: this project's stack (docs/design.md).
- ``gpushare-like``: the open-source Alibaba gpushare: ``aliyun.com/gpu-mem`` GiB on
  one card (the ``aliyun.com/gpu-count`` label is ignored), only the open
  ``ALIYUN_COM_GPU_MEM_*`` annotations, no isolation.
- ``hami-like``: HAMi: ``nvidia.com/gpu`` cards and ``nvidia.com/gpumem`` MiB per card,
  HAMi's node and pod annotations, and an isolation library that counts each
  process's CUDA context against the share, as HAMi-core does.
"""

from __future__ import annotations

from gpushare_stack.contract import REFERENCE_FLAVOR as REFERENCE

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
