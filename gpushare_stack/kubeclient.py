"""The official ``kubernetes`` client, configured once for both stack components."""

from __future__ import annotations

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
