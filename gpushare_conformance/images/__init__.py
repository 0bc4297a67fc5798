"""Container images built locally (no registry): an OCI archive writer and the recipes."""
