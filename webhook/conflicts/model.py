"""Pods as the conflict detector sees them: placement, provenance and arrival.

A `PodRecord` is the policy's `PodView` (requests, tolerations, affinity,
ports, parsed exactly as the scheduler parses them) plus what only conflict
detection needs: who placed the pod, when it arrived on its node, its phase
and the kubelet's reason, and the controller that owns it.

Who placed a pod, in this order:

1. `placement-webhook.io/selected-node` equal to `spec.nodeName`: this webhook
   (the admission path sets it; the reconciler puts it on its Binding, and the
   API server copies Binding annotations onto the pod).
2. `spec.nodeName` owned by a field manager in `managedFields`: a client set
   it directly (the pod was created with it). The Binding subresource leaves
   no managed field behind, which is how a bind is told apart.
3. Bound through a Binding: kube-scheduler when `schedulerName` is
   `default-scheduler` (or empty), otherwise the scheduler it names.
   Without managedFields (stripped by the client) rule 2 cannot run and the
   pod is attributed by `schedulerName` alone.

Mirror pods of static pods are the kubelet's own: they count against their
node, but are never checked against taints or affinity (the kubelet does not
check them either).

Arrival on the node: pods the kubelet has already admitted come first (it
writes their Initialized / PodReadyToStartContainers conditions, or they
run); then, when the pod was bound through a Binding, the `PodScheduled=True`
condition's transition time (the bind), else its creationTimestamp; ties
(the API has one-second timestamps) are broken by resourceVersion, then
namespace/name. Admission first because a real kubelet has decided for those
pods already: the overcommit it sees is resolved by rejecting the others, so
they are the culprits (and the ones evict mode may evict). The
resourceVersion alone would get this wrong: the kubelet's status writes
raise an admitted pod's version above that of a pod bound after it in the
same second. Terminating pods (deletionTimestamp) count for nothing, as in
the policy's model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

from webhook.policy import marks
from webhook.policy.model import PodView

SELECTED_NODE_ANNOTATION: Final = marks.SELECTED_NODE
BOUND_BY_ANNOTATION: Final = marks.BOUND_BY
"""Set on the Binding by the reconciler: `reconciler/<identity>`."""

MIRROR_ANNOTATION: Final = marks.MIRROR_ANNOTATION

WEBHOOK: Final = marks.SCHEDULER_NAME
KUBE_SCHEDULER: Final = "kube-scheduler"
OTHER_SCHEDULER: Final = "other-scheduler"
DIRECT: Final = "direct-nodeName"
KUBELET: Final = "kubelet"
"""Static pods: the kubelet runs them from files; their API objects are mirrors."""

#: Controllers that create a replacement when their pod is evicted (not
#: DaemonSet: its replacement lands on the same node).
RECREATING_CONTROLLERS: Final = frozenset(
    {"ReplicaSet", "ReplicationController", "StatefulSet", "Job"}
)


@dataclass(frozen=True, slots=True)
class Owner:
    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class Provenance:
    placed_by: str
    """placement-webhook | kube-scheduler | other-scheduler | direct-nodeName | kubelet"""
    detail: str = ""
    """Scheduler name, field manager, or admission/reconciler for this webhook."""
    via_binding: bool = False


def _node_name_managers(meta: Mapping[str, Any]) -> list[str] | None:
    """Field managers owning spec.nodeName on the main resource; None without managedFields."""
    entries = meta.get("managedFields")
    if not entries:
        return None
    owners = []
    for entry in entries:
        if entry.get("subresource"):
            continue
        spec = ((entry.get("fieldsV1") or {}).get("f:spec")) or {}
        if "f:nodeName" in spec:
            owners.append(str(entry.get("manager") or "unknown"))
    return owners


def provenance(pod: Mapping[str, Any]) -> Provenance:
    """Who placed a bound pod (see the module notes for the rules)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    node = spec.get("nodeName") or ""
    annotations = meta.get("annotations") or {}
    if MIRROR_ANNOTATION in annotations:
        return Provenance(KUBELET, "static pod", False)
    managers = _node_name_managers(meta)
    via_binding = managers is not None and not managers
    if node and annotations.get(SELECTED_NODE_ANNOTATION) == node:
        bound_by = str(annotations.get(BOUND_BY_ANNOTATION) or "")
        return Provenance(WEBHOOK, bound_by or "admission", via_binding)
    if managers:
        return Provenance(DIRECT, ",".join(sorted(set(managers))), False)
    scheduler = str(spec.get("schedulerName") or "default-scheduler")
    if scheduler == "default-scheduler":
        return Provenance(KUBE_SCHEDULER, scheduler, via_binding)
    if scheduler == WEBHOOK:
        return Provenance(WEBHOOK, "schedulerName", via_binding)
    return Provenance(OTHER_SCHEDULER, scheduler, via_binding)


def _scheduled_at(pod: Mapping[str, Any]) -> str | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            stamp = cond.get("lastTransitionTime")
            return str(stamp) if stamp else None
    return None


KUBELET_CONDITIONS: Final = frozenset({"Initialized", "PodReadyToStartContainers"})
"""Conditions only the kubelet writes, and only for a pod it admitted."""


def _admitted(status: Mapping[str, Any]) -> bool:
    """The kubelet admitted the pod: it runs, or the kubelet wrote its conditions."""
    if status.get("phase") == "Running":
        return True
    return any(c.get("type") in KUBELET_CONDITIONS for c in status.get("conditions") or ())


def _version(raw: Any) -> int:
    text = str(raw or "")
    return int(text) if text.isdigit() else 0


@dataclass(frozen=True, slots=True)
class PodRecord:
    """One pod, parsed once, with everything conflict detection looks at."""

    view: PodView
    phase: str
    reason: str
    """status.reason: the kubelet's rejection reason (OutOfcpu, NodeAffinity...)."""
    message: str
    created: str
    arrived: str
    resource_version: int
    provenance: Provenance
    owner: Owner | None
    terminating: bool
    admitted: bool = False
    """A kubelet admitted the pod on its node (see the module notes on arrival)."""

    @property
    def uid(self) -> str:
        return self.view.uid

    @property
    def key(self) -> str:
        return self.view.key

    @property
    def node(self) -> str | None:
        return self.view.node_name

    @property
    def counted(self) -> bool:
        """Bound, not Succeeded/Failed, not terminating: it occupies its node."""
        view = self.view
        return view.node_name is not None and not (view.is_terminal or view.is_terminating)

    @property
    def arrival(self) -> tuple[bool, str, int, str, str]:
        """Sort key: earlier arrivals first, pods the kubelet admitted before all others."""
        return (
            not self.admitted,
            self.arrived,
            self.resource_version,
            self.view.namespace,
            self.view.name,
        )

    @staticmethod
    def from_dict(pod: Mapping[str, Any]) -> PodRecord:
        """Parse a v1 Pod. Raises ValueError on malformed quantities or selectors."""
        view = PodView.from_dict(pod)
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        prov = provenance(pod)
        created = str(meta.get("creationTimestamp") or "")
        arrived = (_scheduled_at(pod) if prov.via_binding else None) or created
        owner = None
        for ref in meta.get("ownerReferences") or ():
            if ref.get("controller"):
                owner = Owner(str(ref.get("kind")), str(ref.get("name")), str(ref.get("uid")))
                break
        return PodRecord(
            view=view,
            phase=str(status.get("phase") or ""),
            reason=str(status.get("reason") or ""),
            message=str(status.get("message") or ""),
            created=created,
            arrived=arrived,
            resource_version=_version(meta.get("resourceVersion")),
            provenance=prov,
            owner=owner,
            terminating=meta.get("deletionTimestamp") is not None,
            admitted=_admitted(status),
        )


@dataclass(frozen=True, slots=True)
class PodRef:
    """A pod named in a conflict."""

    namespace: str
    name: str
    uid: str
    placed_by: str
    detail: str
    arrived: str
    owner: Owner | None = None

    @staticmethod
    def of(record: PodRecord) -> PodRef:
        return PodRef(
            record.view.namespace,
            record.view.name,
            record.uid,
            record.provenance.placed_by,
            record.provenance.detail,
            record.arrived,
            record.owner,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "placedBy": self.placed_by,
            "detail": self.detail,
            "arrived": self.arrived,
        }
        if self.owner is not None:
            out["owner"] = {"kind": self.owner.kind, "name": self.owner.name}
        return out


OVERCOMMIT: Final = "Overcommit"
HOST_PORT: Final = "HostPort"
NODE_AFFINITY: Final = "NodeAffinity"
TAINT: Final = "Taint"
POD_ANTI_AFFINITY: Final = "PodAntiAffinity"
TOPOLOGY_SPREAD: Final = "TopologySpread"
KUBELET_REJECTED: Final = "KubeletRejected"
KINDS: Final = (
    OVERCOMMIT,
    HOST_PORT,
    NODE_AFFINITY,
    TAINT,
    POD_ANTI_AFFINITY,
    TOPOLOGY_SPREAD,
    KUBELET_REJECTED,
)


def _empty() -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True)
class Conflict:
    """Pods that do not fit together (or a pod that does not fit its node).

    `culprits` are the pods that lost: for Overcommit and HostPort, the pods a
    kubelet admitting the node's pods in arrival order would reject; for pair
    conflicts, the later of the two; for single-pod conflicts, the pod.
    """

    kind: str
    node: str
    message: str
    pods: tuple[PodRef, ...]
    culprits: tuple[PodRef, ...]
    last_arrived: PodRef
    details: Mapping[str, Any] = field(default_factory=_empty)
    scope: str = ""
    """Distinguishes conflicts of one kind on one node (a port, a domain...)."""

    @cached_property
    def key(self) -> str:
        """Stable identity across detection passes (same losers, same conflict); cached,
        since the incremental detector sorts the standing conflicts on every change."""
        culprits = ",".join(sorted(p.uid for p in self.culprits))
        return f"{self.kind}/{self.node}/{self.scope}/{culprits}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "node": self.node,
            "message": self.message,
            "culprits": [p.to_json() for p in self.culprits],
            "lastArrived": self.last_arrived.to_json(),
            "pods": [p.to_json() for p in self.pods],
            "details": dict(self.details),
        }
