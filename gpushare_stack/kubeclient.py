"""The official ``kubernetes`` client, configured once for both stack components."""

from __future__ import annotations

import argparse
import math

from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException


class KubeconfigError(RuntimeError):
    """No usable cluster configuration; the message names the file (or the service account)."""


def load(kubeconfig: str | None) -> client.ApiClient:
    """An ApiClient from ``kubeconfig`` if given, else the in-cluster service account.

    An unusable configuration (missing, empty, not a kubeconfig) is a ``KubeconfigError``
    of one line naming it, for the commands to print without a traceback."""
    try:
        if kubeconfig:
            config.load_kube_config(config_file=kubeconfig)
        else:
            config.load_incluster_config()
    except (ConfigException, OSError, ValueError, TypeError, AttributeError) as exc:
        where = f"--kubeconfig {kubeconfig}" if kubeconfig else "the in-cluster service account (no --kubeconfig)"
        raise KubeconfigError(f"{where} cannot be used: {' '.join(str(exc).split())}") from None
    return client.ApiClient()


def load_or_exit(parser: argparse.ArgumentParser, kubeconfig: str | None) -> client.ApiClient:
    """``load`` for a program's ``main``: an unusable configuration exits 2 with its one line."""
    try:
        return load(kubeconfig)
    except KubeconfigError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")


def require_node_name(parser: argparse.ArgumentParser, node_name: str | None) -> str:
    """The node a node component runs on, or a usage error saying how to give it."""
    if not node_name:
        parser.error("--node-name is required (or set env NODE_NAME, e.g. from spec.nodeName)")
    return node_name


def require_positive_seconds(parser: argparse.ArgumentParser, option: str, value: float) -> None:
    """A period option must be a finite number of seconds above 0."""
    if not math.isfinite(value) or value <= 0:
        parser.error(f"{option} must be > 0, got {value}")


def version() -> str:
    """The installed package's version (importlib.metadata), for ``--version``."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("gpushare-conformance")
    except PackageNotFoundError:
        return "unknown (not installed)"


# The generated client picks the first JSON patch type it knows (JSON Patch, which
# needs a list) unless told; the stack's patches are merge patches of annotations.
MERGE_PATCH = "application/merge-patch+json"
