"""The official ``kubernetes`` client, configured once for both stack components."""

from __future__ import annotations

from kubernetes import client, config


def load(kubeconfig: str | None) -> client.ApiClient:
    """An ApiClient from ``kubeconfig`` if given, else the in-cluster service account."""
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig)
    else:
        config.load_incluster_config()
    return client.ApiClient()


# The generated client picks the first JSON patch type it knows (JSON Patch, which
# needs a list) unless told; the stack's patches are merge patches of annotations.
MERGE_PATCH = "application/merge-patch+json"
