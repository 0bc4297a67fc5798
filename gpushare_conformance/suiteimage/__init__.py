"""The suite image: the checks packaged as a Kubernetes conformance image (docs/in-cluster.md)."""
