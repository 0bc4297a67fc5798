"""gRPC stubs of the kubelet's DRA plugin service v1 (generated: gpushare_stack/api/generate.py)."""
