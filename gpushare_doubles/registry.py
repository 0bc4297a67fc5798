"""The doubles' entry for the stack's seam (``gpushare_stack/variants.py``): which
flavors and faults each program takes, and the policy object for a pair of them.

A policy is the flavor's class with the fault's mixin over it, so a fault breaks the
one seam it names whatever the flavor answers elsewhere.
"""

from __future__ import annotations

from typing import Any

from gpushare_doubles import faults
from gpushare_doubles.flavors import GPUSHARE_LIKE, HAMI_LIKE, REFERENCE
from gpushare_stack import variants
from gpushare_stack.deviceplugin.policy import ReferenceDevicePlugin
from gpushare_stack.dra.policy import ReferenceDraDriver
from gpushare_stack.extender.policy import ReferenceExtender


def _flavors(component: str) -> dict[str, type]:
    """The flavor classes of ``component`` (imported here only, so naming a flavor's
    module costs nothing to a program that runs another)."""
    if component == variants.EXTENDER:
        from gpushare_doubles.flavors.gpushare_like import GpushareLikeExtender
        from gpushare_doubles.flavors.hami_like import HamiLikeExtender

        return {REFERENCE: ReferenceExtender, GPUSHARE_LIKE: GpushareLikeExtender, HAMI_LIKE: HamiLikeExtender}
    if component == variants.DEVICE_PLUGIN:
        from gpushare_doubles.flavors.gpushare_like import GpushareLikeDevicePlugin
        from gpushare_doubles.flavors.hami_like import HamiLikeDevicePlugin

        return {
            REFERENCE: ReferenceDevicePlugin,
            GPUSHARE_LIKE: GpushareLikeDevicePlugin,
            HAMI_LIKE: HamiLikeDevicePlugin,
        }
    if component == variants.DRA_PLUGIN:
        return {REFERENCE: ReferenceDraDriver}
    raise ValueError(f"gpushare: no program {component!r}")


_FAULTS = {
    variants.EXTENDER: faults.EXTENDER_MIXINS,
    variants.DEVICE_PLUGIN: faults.DEVICE_PLUGIN_MIXINS,
    variants.DRA_PLUGIN: faults.DRA_PLUGIN_MIXINS,
}
_FLAVOR_NAMES = {variants.EXTENDER: (GPUSHARE_LIKE, HAMI_LIKE), variants.DEVICE_PLUGIN: (GPUSHARE_LIKE, HAMI_LIKE)}


def names(component: str, kind: str) -> tuple[str, ...]:
    """The doubles' names ``component`` takes for ``--flavor`` or ``--fault`` (``kind``)."""
    if kind == variants.FLAVOR:
        return _FLAVOR_NAMES.get(component, ())
    return tuple(_FAULTS.get(component, {}))


def variant(component: str, flavor: str = REFERENCE, fault: str | None = None) -> Any:
    """The policy of ``component`` for ``flavor`` with ``fault`` over it."""
    flavors = _flavors(component)
    if flavor not in flavors:
        raise ValueError(f"gpushare: --flavor must be one of {tuple(flavors)}, got {flavor!r}")
    base = flavors[flavor]
    if fault is None:
        return base()
    mixins = _FAULTS[component]
    if fault not in mixins:
        raise ValueError(f"gpushare: --fault must be one of {tuple(mixins)}, got {fault!r}")
    return type(f"{base.__name__}With{mixins[fault].__name__}", (mixins[fault], base), {"fault": fault})()


def extender(flavor: str = REFERENCE, fault: str | None = None) -> ReferenceExtender:
    """The extender's policy (for tests building a ``ClusterState``)."""
    return variant(variants.EXTENDER, flavor, fault)


def device_plugin(flavor: str = REFERENCE, fault: str | None = None) -> ReferenceDevicePlugin:
    """The device plugin's policy (for tests building a ``DevicePlugin``)."""
    return variant(variants.DEVICE_PLUGIN, flavor, fault)


def dra_plugin(fault: str | None = None) -> ReferenceDraDriver:
    """The DRA driver's policy."""
    return variant(variants.DRA_PLUGIN, REFERENCE, fault)
