"""The reference DRA driver (docs/dra.md): each card of a node published as one device
whose ``memory`` capacity claims consume in GiB steps, and a kubelet plugin that hands
a container its shares. Not deployed yet: the pieces here are the driver's pure parts
and its kubelet-facing gRPC services."""
