"""Kubernetes object bodies as they travel: TypedDicts, and the one layer that reads them.

Bodies come and go as plain dicts (orjson, no generated model classes: far
too slow for watch streams). Their shape is written down here as TypedDicts
(the fields this project reads or writes, `total=False` as the API omits
empty ones), and every shell reads a body's identity and common fields
through the accessors below instead of chaining `.get("metadata") or {}`:
an accessor answers with an empty value for a field that is missing *or of
the wrong JSON type*, so an untrusted body cannot make a reader raise.

Where a shell handles one object for a while (a pod it binds, a review it
answers), it takes what it needs once, at the edge, into a frozen
`ObjectRef` (namespace, name, uid, resourceVersion) and passes that on. The
policy core parses pods and nodes into its own views (webhook.policy.model).

Pure: no I/O, no imports of the project.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypedDict

__all__ = [
    "Binding",
    "ListMeta",
    "ObjectMeta",
    "ObjectRef",
    "OwnerReference",
    "Pod",
    "PodCondition",
    "PodSpec",
    "PodStatus",
    "annotations_of",
    "binding",
    "controller_of",
    "labels_of",
    "list_meta",
    "meta",
    "node_name",
    "resource_version",
    "scheduler_name",
    "spec",
    "status",
]


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool


class ObjectMeta(TypedDict, total=False):
    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    deletionTimestamp: str


class PodSpec(TypedDict, total=False):
    """The fields of a pod's spec that the shells read (the policy reads the rest)."""

    nodeName: str
    schedulerName: str
    schedulingGates: list[dict[str, str]]
    affinity: dict[str, Any]


class PodCondition(TypedDict, total=False):
    type: str
    status: str
    reason: str
    message: str
    lastProbeTime: str | None
    lastTransitionTime: str


class PodStatus(TypedDict, total=False):
    phase: str
    conditions: list[PodCondition]


class Pod(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus


class _Target(TypedDict):
    apiVersion: str
    kind: str
    name: str


class Binding(TypedDict):
    """The body of a `pods/<name>/binding` POST."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    target: _Target


#: A list's metadata ("continue" is a Python keyword, hence the functional form).
ListMeta = TypedDict("ListMeta", {"resourceVersion": str, "continue": str}, total=False)

_EMPTY: Final[Mapping[str, Any]] = {}


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else _EMPTY


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


# ---------------------------------------------------------------- accessors


def meta(obj: Mapping[str, Any]) -> ObjectMeta:
    """`metadata`, or an empty one when it is missing or not an object."""
    return _object(obj.get("metadata"))  # type: ignore[return-value]


def list_meta(page: Mapping[str, Any]) -> ListMeta:
    """A list's `metadata` (its resourceVersion and continue token), or an empty one."""
    return _object(page.get("metadata"))  # type: ignore[return-value]


def spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _object(obj.get("spec"))


def status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _object(obj.get("status"))


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _object(meta(obj).get("labels"))


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _object(meta(obj).get("annotations"))


def resource_version(obj: Mapping[str, Any]) -> str:
    return _text(meta(obj).get("resourceVersion"))


def node_name(pod: Mapping[str, Any]) -> str:
    """The node a pod is bound to, "" when none."""
    return _text(spec(pod).get("nodeName"))


def scheduler_name(pod: Mapping[str, Any]) -> str:
    """The pod's schedulerName as written ("" when unset: the API server's default applies)."""
    return _text(spec(pod).get("schedulerName"))


def controller_of(obj: Mapping[str, Any]) -> OwnerReference | None:
    """The first ownerReference with `controller: true` (metav1.GetControllerOf)."""
    refs = meta(obj).get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref
    return None


@dataclass(frozen=True)
class ObjectRef:
    """Who an object is, read once from its metadata."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""

    @staticmethod
    def of(obj: Mapping[str, Any]) -> ObjectRef:
        m = meta(obj)
        return ObjectRef(
            _text(m.get("namespace")),
            _text(m.get("name")),
            _text(m.get("uid")),
            _text(m.get("resourceVersion")),
        )

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


# ---------------------------------------------------------------- bodies we write


def binding(pod: ObjectRef, node: str, annotations: Mapping[str, str] | None = None) -> Binding:
    """A v1 Binding of `pod` to `node`, as kube-scheduler's DefaultBinder writes it.

    With the pod's uid, the API server binds only that pod (one deleted and
    recreated under the same name is refused); `annotations` are copied onto
    the pod by the API server.
    """
    metadata: ObjectMeta = {"name": pod.name, "namespace": pod.namespace}
    if pod.uid:
        metadata["uid"] = pod.uid
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
