"""Errors the extender's state and its policy both raise, apart from either, so the
policy (``policy.py``) need not import the state that asks it."""

from __future__ import annotations


class BindError(RuntimeError):
    """The pod cannot be bound to the node (message says why)."""


class NodeNotKnown(LookupError):
    """A pod's allocation names cards by a node's card list the extender has not read yet."""
