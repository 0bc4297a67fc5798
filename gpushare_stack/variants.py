"""Where variants of the stack plug in: ``--flavor`` and ``--fault`` of the three programs.

The shipped stack holds only its own behaviour. Each program asks a policy object
wherever a variant could differ (``extender/policy.py``, ``deviceplugin/policy.py``,
``dra/policy.py``); the reference objects answer with this project's rules. Variants
that exist only to test the suite - the peers' flavors (stacks like gpushare and HAMi)
and the deliberate faults - live in the test doubles' package, ``gpushare_doubles``,
which the test images carry beside the stack. The stack never imports that package in
its code: this module looks its registry up by name, and only when a command line asks
for something other than the reference behaviour (or names a variant that must be
checked). Without the package a program runs the reference behaviour and refuses any
other name.

The registry (``gpushare_doubles.registry``) is any module with the two functions of
``Registry``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
from types import ModuleType
from typing import Any, Protocol, cast

from gpushare_stack import contract

REGISTRY = "gpushare_doubles.registry"
REFERENCE = contract.REFERENCE_FLAVOR
EXTENDER = "gpushare-extender"
DEVICE_PLUGIN = "gpushare-device-plugin"
DRA_PLUGIN = "gpushare-dra-plugin"
FLAVOR = "flavor"
FAULT = "fault"

FAULT_HELP = "for proving the suite catches a broken stack; never use in production"


class Registry(Protocol):
    """What the test doubles' package offers the stack."""

    def names(self, component: str, kind: str) -> tuple[str, ...]:
        """The names ``component`` takes for ``--flavor`` or ``--fault`` (``kind``)."""
        ...

    def variant(self, component: str, flavor: str, fault: str | None) -> Any:
        """The policy object of ``component`` for a flavor and a fault (either may be the
        reference: ``REFERENCE``, ``None``); ValueError for a name it does not know."""
        ...


class VariantError(ValueError):
    """A variant was asked for that this installation does not have."""


def registry() -> Registry | None:
    """The test doubles' registry, or None where the package is not installed."""
    try:
        module: ModuleType = importlib.import_module(REGISTRY)
    except ModuleNotFoundError as exc:
        if exc.name is not None and REGISTRY.startswith(exc.name):
            return None
        raise
    return cast(Registry, module)


def names(component: str, kind: str) -> tuple[str, ...]:
    """Every name ``component`` accepts for ``kind``: the reference's, then the doubles'."""
    found = registry()
    own = (REFERENCE,) if kind == FLAVOR else ()
    return own + (found.names(component, kind) if found is not None else ())


def load(component: str, flavor: str = REFERENCE, fault: str | None = None) -> Any | None:
    """The policy of ``component`` for ``flavor`` and ``fault``; None for the reference
    behaviour (the caller uses its own reference object)."""
    if flavor == REFERENCE and fault is None:
        return None
    found = registry()
    if found is None:
        raise VariantError(
            f"gpushare: {component}: --flavor {flavor} / --fault {fault} need the test doubles "
            f"({REGISTRY.split('.')[0]}), which this installation does not carry"
        )
    return found.variant(component, flavor, fault)


def _choice(component: str, kind: str) -> type[argparse.Action]:
    """An option whose names are looked up only when it is given (argparse's ``choices``
    would import the doubles for every start)."""

    class Choice(argparse.Action):
        def __call__(
            self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any, option: Any = None
        ) -> None:
            known = (REFERENCE,) if value == REFERENCE and kind == FLAVOR else names(component, kind)
            if value not in known:
                raise argparse.ArgumentError(self, f"invalid choice: {value!r} (choose from {', '.join(known)})")
            setattr(namespace, self.dest, value)

    return Choice


def add_flavor_option(parser: argparse.ArgumentParser, component: str) -> None:
    """``--flavor`` of ``component``'s command line."""
    parser.add_argument(
        "--flavor",
        action=_choice(component, FLAVOR),
        default=REFERENCE,
        help=f"which stack to behave like: {REFERENCE} is this project's stack; the others are "
        f"the peers' flavors of the test doubles ({REGISTRY.split('.')[0]}/flavors: gpushare-like, "
        "hami-like), present where the image carries them (default: %(default)s)",
    )


def add_fault_option(parser: argparse.ArgumentParser, component: str) -> None:
    """``--fault`` of ``component``'s command line."""
    doubles = REGISTRY.split(".")[0]
    parser.add_argument(
        "--fault",
        action=_choice(component, FAULT),
        default=None,
        help=f"break the program on purpose, {FAULT_HELP}: a fault of the test doubles "
        f"({doubles}/faults.py names each and what it breaks), present where the image carries "
        "them (default: no fault)",
    )


def warn_fault(log: logging.Logger, component: str, fault: str | None) -> None:
    """Log a loud WARNING at start when a fault is on, so no one mistakes the stack for a sound one."""
    if fault is None:
        return
    banner = "!" * 72
    log.warning("%s", banner)
    log.warning("FAULT INJECTED: %s runs with --fault %s (%s)", component, fault, FAULT_HELP)
    log.warning("%s", banner)
