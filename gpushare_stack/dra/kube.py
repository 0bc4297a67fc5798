"""The DRA driver's API access: claims and pods it reads, the slice it publishes."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client


class DraKubeAccess:
    """Reads claims and pods as the API's JSON, and hands the publisher ResourceV1Api."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.resource = client.ResourceV1Api(api)

    def claim(self, namespace: str, name: str) -> dict[str, Any]:
        response = self.resource.read_namespaced_resource_claim(name, namespace, _preload_content=False)
        return json.loads(response.data)

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        response = self.core.read_namespaced_pod(name, namespace, _preload_content=False)
        return json.loads(response.data)
