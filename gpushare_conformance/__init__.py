"""gpushare-conformance: end-to-end conformance checks for GPU memory sharing on Kubernetes."""

__version__ = "0.1.0"
