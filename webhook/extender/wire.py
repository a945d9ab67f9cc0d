"""The scheduler-extender wire format, as kube-scheduler speaks it (extender/v1).

The Go types in k8s.io/kube-scheduler/extender/v1 have no json tags, so
kube-scheduler sends the Go field names as keys ("Pod", "Nodes", "NodeNames",
"PodName", ...), and a nil pointer as `null` (no omitempty): a request carries
`"Nodes": null` when nodeCacheCapable is true and `"NodeNames": null` when it
is false. Go's decoder matches keys case-insensitively (an exact match wins),
which is why extenders built on copies of the types with lower-case tags
("pod", "nodenames", "failedNodes") interoperate. We read keys the same way and
write the Go field names, which is what kube-scheduler's own encoder produces.

The filter answer mirrors the request: NodeNames for a node-cache-capable
scheduler (it ignores Nodes then), the passing Node objects as received
otherwise (it ignores NodeNames then). An empty list, never null, means "no
node passed": kube-scheduler reads a missing list as "no nodes" too, but an
explicit list says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import orjson

from webhook import bodies

MAX_EXTENDER_PRIORITY = 10
"""extenderv1.MaxExtenderPriority: kube-scheduler multiplies by weight * (100 / 10)."""
MAX_BODY_BYTES = 64 * 1024 * 1024  # 5,000 full Node objects are ~15 MiB


class WireError(ValueError):
    """The request body is not what kube-scheduler sends."""


class FilterResultJSON(TypedDict, total=False):
    Nodes: dict[str, Any] | None
    NodeNames: list[str] | None
    FailedNodes: dict[str, str]
    FailedAndUnresolvableNodes: dict[str, str]
    Error: str


class HostPriorityJSON(TypedDict):
    Host: str
    Score: int


class BindingResultJSON(TypedDict, total=False):
    Error: str


@dataclass(frozen=True)
class ExtenderArgs:
    """ExtenderArgs: the pod and its candidate nodes (names, or objects too)."""

    pod: Mapping[str, Any]
    node_names: tuple[str, ...]
    nodes: tuple[Mapping[str, Any], ...] | None = None
    """The Node objects, when the scheduler is not node-cache-capable (else None)."""

    @property
    def node_cache_capable(self) -> bool:
        return self.nodes is None


@dataclass(frozen=True)
class BindingArgs:
    """ExtenderBindingArgs: bind this pod (name, namespace, uid) to this node."""

    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


def field(obj: Mapping[str, Any], name: str) -> Any:
    """`obj[name]` matched as Go's encoding/json does: exact key first, then any case."""
    if name in obj:
        return obj[name]
    folded = name.casefold()
    for key, value in obj.items():
        if isinstance(key, str) and key.casefold() == folded:
            return value
    return None


def _object(body: bytes, what: str) -> Mapping[str, Any]:
    if len(body) > MAX_BODY_BYTES:
        raise WireError(f"{what} of {len(body)} bytes exceeds {MAX_BODY_BYTES}")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise WireError(f"{what} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise WireError(f"{what} must be a JSON object")
    return data


def _name_of(node: Any, index: int) -> str:
    name = bodies.meta(node).get("name") if isinstance(node, dict) else None
    if not isinstance(name, str) or not name:
        raise WireError(f"Nodes.items[{index}] has no metadata.name")
    return name


def parse_args(body: bytes) -> ExtenderArgs:
    """Decode an ExtenderArgs body (filter and prioritize)."""
    data = _object(body, "ExtenderArgs")
    pod = field(data, "Pod")
    if not isinstance(pod, dict):
        raise WireError("ExtenderArgs.Pod must be a Pod object")
    names = field(data, "NodeNames")
    node_list = field(data, "Nodes")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise WireError("ExtenderArgs.NodeNames must be a list of strings")
        return ExtenderArgs(pod=pod, node_names=tuple(names))
    if node_list is None:
        raise WireError("ExtenderArgs has neither NodeNames nor Nodes")
    if not isinstance(node_list, dict):
        raise WireError("ExtenderArgs.Nodes must be a NodeList object")
    items = field(node_list, "Items")
    items = [] if items is None else items
    if not isinstance(items, list):
        raise WireError("ExtenderArgs.Nodes.items must be a list")
    return ExtenderArgs(
        pod=pod,
        node_names=tuple(_name_of(n, i) for i, n in enumerate(items)),
        nodes=tuple(items),
    )


def parse_binding(body: bytes) -> BindingArgs:
    """Decode an ExtenderBindingArgs body."""
    data = _object(body, "ExtenderBindingArgs")
    values = {}
    for name in ("PodName", "PodNamespace", "PodUID", "Node"):
        value = field(data, name)
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise WireError(f"ExtenderBindingArgs.{name} must be a string")
        values[name] = value
    for required in ("PodName", "PodNamespace", "Node"):
        if not values[required]:
            raise WireError(f"ExtenderBindingArgs.{required} is required")
    return BindingArgs(
        pod_name=values["PodName"],
        pod_namespace=values["PodNamespace"],
        pod_uid=values["PodUID"],
        node=values["Node"],
    )


def filter_result(
    args: ExtenderArgs,
    passed: Sequence[str],
    failed: Mapping[str, str] | None = None,
    unresolvable: Mapping[str, str] | None = None,
) -> FilterResultJSON:
    """An ExtenderFilterResult in the form the request asked for."""
    result: FilterResultJSON = {
        "FailedNodes": dict(failed or {}),
        "FailedAndUnresolvableNodes": dict(unresolvable or {}),
    }
    if args.nodes is None:
        result["NodeNames"] = list(passed)
        result["Nodes"] = None
    else:
        keep = set(passed)
        items = [n for n, name in zip(args.nodes, args.node_names, strict=True) if name in keep]
        result["Nodes"] = {"metadata": {}, "items": items}
        result["NodeNames"] = None
    return result


def filter_error(message: str) -> FilterResultJSON:
    """An ExtenderFilterResult that fails the scheduling attempt (kube-scheduler retries)."""
    return {"Error": message}


def host_priorities(scores: Sequence[tuple[str, int]]) -> list[HostPriorityJSON]:
    """A HostPriorityList; scores must already be within 0..MaxExtenderPriority."""
    out: list[HostPriorityJSON] = []
    for host, score in scores:
        if not 0 <= score <= MAX_EXTENDER_PRIORITY:
            raise ValueError(f"score {score} for {host} is outside 0..{MAX_EXTENDER_PRIORITY}")
        out.append({"Host": host, "Score": int(score)})
    return out


def binding_result(error: str = "") -> BindingResultJSON:
    return {"Error": error} if error else {}
