"""gRPC stubs of the kubelet's plugin registration service v1 (generated: gpushare_stack/api/generate.py)."""
