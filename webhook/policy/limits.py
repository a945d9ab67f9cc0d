"""What a pod may look like for the core to decide it: shapes and sizes, checked before parsing.

The API server validates pods before admission, but a review can be forged
by whoever reaches an unauthenticated webhook port, and some pods the API
accepts are very expensive to decide (10,000 node selector terms, 20,000
host ports). Every field the policy reads is checked here for its JSON type,
and the lists that multiply the decision's cost are counted against limits
that keep the worst accepted pod within a small multiple of a plain pod's
cost. A pod that fails is not placed: it is left to the default scheduler,
with the reason (`Placer` skips it), never half-evaluated.

Pure: a dict in, a reason or None out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True)
class PodLimits:
    """Per-pod limits; each far above what real workloads use."""

    containers: int = 64
    """containers + initContainers."""
    host_ports: int = 256
    """Container ports with a hostPort."""
    tolerations: int = 256
    node_selector_terms: int = 64
    """Required and preferred node affinity terms together."""
    selector_requirements: int = 512
    """matchExpressions + matchFields + matchLabels entries over all selectors of the pod."""
    selector_values: int = 2048
    """Values over all requirements of all selectors."""
    affinity_terms: int = 64
    """Pod affinity and anti-affinity terms, required and preferred."""
    spread_constraints: int = 32
    labels: int = 512
    """Pod labels (inter-pod affinity and spread match them against every pod)."""
    label_bytes: int = 128 * 1024
    """Pod labels' keys and values, bytes."""
    volumes: int = 512
    node_selector: int = 256
    """spec.nodeSelector entries."""


class _Map:
    """A JSON object whose values all have one shape."""

    def __init__(self, value: object):
        self.value = value


class _List:
    """A JSON array whose items all have one shape."""

    def __init__(self, item: object):
        self.item = item


QUANTITY: Final = (str, int, float)
_REQUIREMENTS = _List({"key": str, "operator": str, "values": _List(str)})
SELECTOR: Final = {"matchLabels": _Map(str), "matchExpressions": _REQUIREMENTS}
NODE_TERM: Final = {"matchExpressions": _REQUIREMENTS, "matchFields": _REQUIREMENTS}
POD_TERM: Final = {
    "labelSelector": SELECTOR,
    "namespaceSelector": SELECTOR,
    "namespaces": _List(str),
    "topologyKey": str,
    "matchLabelKeys": _List(str),
    "mismatchLabelKeys": _List(str),
}
POD_AFFINITY: Final = {
    "requiredDuringSchedulingIgnoredDuringExecution": _List(POD_TERM),
    "preferredDuringSchedulingIgnoredDuringExecution": _List(
        {"weight": int, "podAffinityTerm": POD_TERM}
    ),
}
RESOURCES: Final = {"requests": _Map(QUANTITY), "limits": _Map(QUANTITY)}
CONTAINER: Final = {
    "name": str,
    "image": str,
    "restartPolicy": str,
    "resources": RESOURCES,
    "ports": _List({"hostPort": int, "hostIP": str, "protocol": str, "containerPort": int}),
}
#: The shape of every part of a pod the policy, the rules and the patches read.
POD: Final = {
    "metadata": {
        "name": str,
        "generateName": str,
        "namespace": str,
        "uid": str,
        "labels": _Map(str),
        "annotations": _Map(str),
        "ownerReferences": _List({"kind": str, "name": str, "controller": bool}),
    },
    "spec": {
        "nodeName": str,
        "schedulerName": str,
        "priority": int,
        "priorityClassName": str,
        "nodeSelector": _Map(str),
        "containers": _List(CONTAINER),
        "initContainers": _List(CONTAINER),
        "overhead": _Map(QUANTITY),
        "resources": RESOURCES,
        "tolerations": _List(
            {"key": str, "operator": str, "value": str, "effect": str, "tolerationSeconds": int}
        ),
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": _List(NODE_TERM)
                },
                "preferredDuringSchedulingIgnoredDuringExecution": _List(
                    {"weight": int, "preference": NODE_TERM}
                ),
            },
            "podAffinity": POD_AFFINITY,
            "podAntiAffinity": POD_AFFINITY,
        },
        "topologySpreadConstraints": _List(
            {
                "maxSkew": int,
                "minDomains": int,
                "topologyKey": str,
                "whenUnsatisfiable": str,
                "labelSelector": SELECTOR,
                "matchLabelKeys": _List(str),
                "nodeAffinityPolicy": str,
                "nodeTaintsPolicy": str,
            }
        ),
        "volumes": _List(dict),
        "schedulingGates": _List(dict),
    },
    "status": {
        "phase": str,
        "containerStatuses": _List(
            {"name": str, "resources": RESOURCES, "allocatedResources": _Map(QUANTITY)}
        ),
    },
}

_NAMES: Final = {str: "a string", int: "an integer", bool: "a boolean", dict: "an object"}


def shape_error(value: Any, shape: object, path: str = "") -> str | None:
    """Where `value` does not have `shape` ("spec.tolerations[3].key: ..."), or None.

    JSON null stands for an absent field of an object (the core reads `x or {}`),
    but not for an item of an array or a map.
    Fields not in the shape are not read by the core and not checked.
    Every review is walked: the path is spelt only for the field at fault.
    """
    found = _walk(value, shape)
    if found is None:
        return None
    parts, message = found
    where = path + "".join(reversed(parts))
    if where.startswith(".") and not path:
        where = where[1:]
    return f"{where or 'pod'}: {message}"


def _walk(value: Any, shape: object) -> tuple[list[str], str] | None:
    """(the path to the fault, innermost part first; what is wrong) or None."""
    if value is None:
        return None
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return [], "must be an object"
        for key, inner in shape.items():
            field = value.get(key)
            if field is None:
                continue
            found = _walk(field, inner)
            if found is not None:
                found[0].append(f".{key}")
                return found
        return None
    if isinstance(shape, _List):
        if not isinstance(value, list):
            return [], "must be an array"
        for i, item in enumerate(value):
            found = ([], "must not be null") if item is None else _walk(item, shape.item)
            if found is not None:
                found[0].append(f"[{i}]")
                return found
        return None
    if isinstance(shape, _Map):
        if not isinstance(value, dict):
            return [], "must be an object"
        for key, item in value.items():
            found = ([], "must not be null") if item is None else _walk(item, shape.value)
            if found is not None:
                found[0].append(f"[{key[:40]!r}]")
                return found
        return None
    message = _scalar_error(value, shape)
    return None if message is None else ([], message)


def _scalar_error(value: Any, shape: object) -> str | None:
    if shape is QUANTITY:
        if isinstance(value, bool) or not isinstance(value, QUANTITY):
            return "must be a quantity (a string or a number)"
        return None
    assert isinstance(shape, type)
    wrong_bool = isinstance(value, bool) and shape is not bool
    if wrong_bool or not isinstance(value, shape):
        return f"must be {_NAMES.get(shape, shape.__name__)}"
    return None


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _selector_counts(selectors: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """(requirements, values) over label and node selectors."""
    requirements = values = 0
    for selector in selectors:
        labels = _obj(selector.get("matchLabels"))
        requirements += len(labels)
        values += len(labels)
        for key in ("matchExpressions", "matchFields"):
            for req in _items(selector.get(key)):
                requirements += 1
                values += len(_items(_obj(req).get("values")))
    return requirements, values


def size_error(pod: Mapping[str, Any], limits: PodLimits) -> str | None:
    """Which limit the pod exceeds, or None. Safe on any JSON: counts only what has the
    right type, so it runs first and a huge pod is refused before its shape is walked."""
    meta, spec = _obj(pod.get("metadata")), _obj(pod.get("spec"))
    containers = _items(spec.get("containers")) + _items(spec.get("initContainers"))
    labels = _obj(meta.get("labels"))
    affinity = _obj(spec.get("affinity"))
    node_affinity = _obj(affinity.get("nodeAffinity"))
    required = _items(
        _obj(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")).get(
            "nodeSelectorTerms"
        )
    )
    preferred = [
        _obj(_obj(p).get("preference"))
        for p in _items(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"))
    ]
    pod_terms: list[Mapping[str, Any]] = []
    for kind in ("podAffinity", "podAntiAffinity"):
        part = _obj(affinity.get(kind))
        pod_terms += [
            _obj(t) for t in _items(part.get("requiredDuringSchedulingIgnoredDuringExecution"))
        ]
        pod_terms += [
            _obj(_obj(t).get("podAffinityTerm"))
            for t in _items(part.get("preferredDuringSchedulingIgnoredDuringExecution"))
        ]
    spreads = [_obj(c) for c in _items(spec.get("topologySpreadConstraints"))]
    cheap = (  # list lengths first: a huge pod is refused before anything is walked
        ("containers", len(containers), limits.containers),
        ("tolerations", len(_items(spec.get("tolerations"))), limits.tolerations),
        ("node selector terms", len(required) + len(preferred), limits.node_selector_terms),
        ("pod affinity terms", len(pod_terms), limits.affinity_terms),
        ("topology spread constraints", len(spreads), limits.spread_constraints),
        ("labels", len(labels), limits.labels),
        ("volumes", len(_items(spec.get("volumes"))), limits.volumes),
        ("nodeSelector entries", len(_obj(spec.get("nodeSelector"))), limits.node_selector),
    )
    exceeded = _first_exceeded(cheap)
    if exceeded:
        return exceeded
    selectors = [_obj(t) for t in required] + preferred
    selectors += [_obj(t.get(k)) for t in pod_terms for k in ("labelSelector", "namespaceSelector")]
    selectors += [_obj(c.get("labelSelector")) for c in spreads]
    requirements, values = _selector_counts(selectors)
    host_ports = sum(
        1 for c in containers for p in _items(_obj(c).get("ports")) if _obj(p).get("hostPort")
    )
    label_bytes = sum(len(k) + len(str(v)) for k, v in labels.items())
    return _first_exceeded(
        (
            ("host ports", host_ports, limits.host_ports),
            ("selector requirements", requirements, limits.selector_requirements),
            ("selector values", values, limits.selector_values),
            ("bytes of labels", label_bytes, limits.label_bytes),
        )
    )


def _first_exceeded(counts: Iterable[tuple[str, int, int]]) -> str | None:
    for what, count, limit in counts:
        if count > limit:
            return f"{count} {what}, more than the {limit} this webhook evaluates"
    return None


def why_not_evaluable(pod: Mapping[str, Any], limits: PodLimits = PodLimits()) -> str | None:
    """The reason the core must not decide this pod (malformed or too costly), or None."""
    too_large = size_error(pod, limits)
    if too_large:
        return too_large
    error = shape_error(pod, POD)
    return f"malformed pod: {error}" if error else None
