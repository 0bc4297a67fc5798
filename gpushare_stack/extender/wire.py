"""The scheduler extender's wire types (k8s.io/kube-scheduler/extender/v1, Go field
names, no tags): reading ExtenderArgs and ExtenderBindingArgs, and the filter,
prioritize and bind results, apart from how they travel (``server``).

A scheduler without nodeCacheCapable sends every candidate Node object (a NodeList of
megabytes) with each filter and expects the kept ones back. Such a request is read
with msgspec: one pass keeps each node as its raw JSON (msgspec.Raw, a view of the
request body), a second reads only a node's name, card annotation and capacity (and
only for a node whose exact JSON it has not read before); the reply writes the kept
nodes' raw JSON back unchanged. No node object is built as Python dicts or
serialised again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
from msgspec import UNSET, UnsetType

from gpushare_stack import contract
from gpushare_stack.extender.nodes import MISSING, NodeSource, card_source
from gpushare_stack.extender.state import ClusterState

log = logging.getLogger(__name__)


class BindBackend(Protocol):
    def bind(self, namespace: str, name: str, uid: str, node: str) -> Any: ...


class WireError(ValueError):
    """A request body that does not follow the extender wire types."""


def _field(body: dict[str, Any], name: str, kind: type, where: str) -> Any:
    value = body.get(name)
    if not isinstance(value, kind):
        raise WireError(f"gpushare: {where}.{name} must be a {kind.__name__}, got {value!r}")
    return value


# ---- reading ExtenderArgs ---------------------------------------------------------
# One pass over the body splits the NodeList into each node's raw JSON; a second,
# per node not seen before, reads the few fields the filter needs and skips the rest. Decoders are
# built once; msgspec holds the GIL for a whole decode or encode, so the server's
# threads share them. The structs are not tracked by the garbage collector (gc=False:
# they hold no cycles), so a request of a thousand nodes adds no collector work.


class _NodeList(msgspec.Struct, gc=False):
    """v1.NodeList with each field and each node kept raw (absent fields stay absent)."""

    kind: msgspec.Raw | UnsetType = UNSET
    apiVersion: msgspec.Raw | UnsetType = UNSET  # noqa: N815 (wire name)
    metadata: msgspec.Raw | UnsetType = UNSET
    items: list[msgspec.Raw] | None = None


class _Args(msgspec.Struct, gc=False):
    Pod: Any = None
    Nodes: _NodeList | None = None
    NodeNames: Any = None


class _Annotations(msgspec.Struct, gc=False):
    cards: str | UnsetType = msgspec.field(default=UNSET, name=contract.NODE_CARDS_ANNOTATION)


class _Capacity(msgspec.Struct, gc=False):
    mem: Any = msgspec.field(default=UNSET, name=contract.RESOURCE_MEM)
    count: Any = msgspec.field(default=UNSET, name=contract.RESOURCE_COUNT)


class _NodeMeta(msgspec.Struct, gc=False):
    name: str = ""
    annotations: _Annotations | None = None


class _NodeStatus(msgspec.Struct, gc=False):
    capacity: _Capacity | None = None


class _NodeView(msgspec.Struct, gc=False):
    """The parts of a v1.Node the filter reads; every other field is skipped."""

    metadata: _NodeMeta | None = None
    status: _NodeStatus | None = None


_ARGS = msgspec.json.Decoder(_Args)
_NODE = msgspec.json.Decoder(_NodeView)
_ANY = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder()

# What each node object read as, by its exact JSON: between two scheduling cycles
# most nodes are sent byte for byte as before, and a lookup costs a copy and a hash
# of the bytes instead of a decode. A changed node (any field) is new bytes, read
# afresh. Shared by the server's threads: a lost race only decodes twice.
_SOURCES: dict[bytes, NodeSource] = {}
_SOURCES_SLACK = 1024  # kept beyond four entries per node of the latest request


def _node_sources(raw_nodes: list[msgspec.Raw]) -> list[NodeSource]:
    if len(_SOURCES) > 4 * len(raw_nodes) + _SOURCES_SLACK:
        _SOURCES.clear()  # old versions of nodes; start over
    sources = []
    for raw in raw_nodes:
        key = bytes(raw)
        ref = _SOURCES.get(key)
        if ref is None:
            ref = _SOURCES[key] = _node_source(_NODE.decode(key))
        sources.append(ref)
    return sources


def _node_source(view: _NodeView) -> NodeSource:
    meta, status = view.metadata, view.status
    if meta is None:
        name, annotation = "", None
    else:
        name = meta.name
        annotation = meta.annotations.cards if meta.annotations is not None else UNSET
        annotation = None if annotation is UNSET else annotation
    if annotation is None and status is not None and status.capacity is not None:
        capacity = status.capacity
        return NodeSource(
            name,
            card_source(
                None,
                MISSING if capacity.mem is UNSET else capacity.mem,
                MISSING if capacity.count is UNSET else capacity.count,
            ),
        )
    return NodeSource(name, card_source(annotation))


@dataclass
class ExtenderArgs:
    """A decoded ExtenderArgs: the pod, and either the node names or the node objects
    (each kept as its raw JSON beside what the filter reads of it)."""

    pod: dict[str, Any]
    names: list[Any] | None = None  # NodeNames (nodeCacheCapable)
    node_list: _NodeList | None = None  # Nodes, raw
    sources: list[NodeSource] | None = None  # one per raw node

    @property
    def node_names(self) -> list[Any]:
        if self.names is not None:
            return self.names
        return [ref.name for ref in self.sources or ()]


def _flavor_node_sources(raw_nodes: list[msgspec.Raw], flavor: Any) -> list[NodeSource]:
    """Node sources read by a peer flavor's own node reader (gpushare_doubles/flavors)."""
    sources = []
    for raw in raw_nodes:
        node = _ANY.decode(bytes(raw))
        if not isinstance(node, dict):
            raise WireError(f"gpushare: ExtenderArgs.Nodes holds a node that is not a v1.Node: {node!r}")
        sources.append(flavor.node_source(node))
    return sources


def decode_extender_args(body: bytes, flavor: Any = None) -> ExtenderArgs:
    """Read ExtenderArgs; WireError names what does not follow the wire types.
    ``flavor``: the extender's flavor, when it reads node objects its own way."""
    try:
        args = _ARGS.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError(f"gpushare: bad request body: {exc}") from None
    pod = args.Pod
    if not isinstance(pod, dict):
        raise WireError(f"gpushare: ExtenderArgs.Pod must be a dict, got {pod!r}")
    if args.NodeNames is not None:
        if not isinstance(args.NodeNames, list):
            raise WireError(f"gpushare: ExtenderArgs.NodeNames must be a list, got {args.NodeNames!r}")
        return ExtenderArgs(pod, names=args.NodeNames)
    if args.Nodes is None:
        raise WireError("gpushare: ExtenderArgs.Nodes must be a dict, got None")
    try:
        if flavor is None or flavor.fast_node_view:
            sources = _node_sources(args.Nodes.items or [])
        else:
            sources = _flavor_node_sources(args.Nodes.items or [], flavor)
    except msgspec.DecodeError as exc:
        raise WireError(f"gpushare: ExtenderArgs.Nodes holds a node that is not a v1.Node: {exc}") from None
    return ExtenderArgs(pod, node_list=args.Nodes, sources=sources)


def filter_result(state: ClusterState, args: ExtenderArgs) -> dict[str, Any]:
    """ExtenderFilterResult for ExtenderArgs (NodeNames when nodeCacheCapable, else Nodes)."""
    if args.names is not None:
        outcome = state.filter(args.pod, args.names)
        return {
            "Nodes": None,
            "NodeNames": outcome.fits,
            "FailedNodes": outcome.failed,
            "FailedAndUnresolvableNodes": outcome.unresolvable,
            "Error": "",
        }
    node_list, sources = args.node_list or _NodeList(), args.sources or []
    outcome = state.filter(args.pod, sources)
    keep = set(outcome.fits)
    # The kept nodes go back as the scheduler sent them: their raw JSON, in its order.
    kept = [raw for raw, ref in zip(node_list.items or (), sources, strict=True) if ref.name in keep]
    return {
        "Nodes": msgspec.structs.replace(node_list, items=kept),
        "NodeNames": None,
        "FailedNodes": outcome.failed,
        "FailedAndUnresolvableNodes": outcome.unresolvable,
        "Error": "",
    }


def prioritize_result(state: ClusterState, args: ExtenderArgs) -> list[dict[str, Any]]:
    return [{"Host": host, "Score": score} for host, score in state.prioritize(args.pod, args.node_names)]


def bind_result(backend: BindBackend | None, args: dict[str, Any]) -> dict[str, str]:
    where = "ExtenderBindingArgs"
    name = _field(args, "PodName", str, where)
    namespace = _field(args, "PodNamespace", str, where)
    uid = _field(args, "PodUID", str, where)
    node = _field(args, "Node", str, where)
    if backend is None:
        return {"Error": "gpushare: this extender runs without an API client and cannot bind"}
    try:
        backend.bind(namespace, name, uid, node)
    except Exception as exc:  # the scheduler shows Error on the pod and retries
        log.warning("bind %s/%s to %s failed: %s", namespace, name, node, exc)
        return {"Error": str(exc)}
    return {"Error": ""}


def decode_object(body: bytes) -> dict[str, Any]:
    try:
        args = _ANY.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError(f"gpushare: bad request body: {exc}") from None
    if not isinstance(args, dict):
        raise WireError(f"gpushare: bad request body: request body must be a JSON object, got {type(args).__name__}")
    return args


def encode(body: Any) -> bytes:
    """JSON of an answer (msgspec: Raw node objects are written back as they came)."""
    return _ENCODER.encode(body)
