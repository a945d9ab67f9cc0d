"""Our marks on a pod, in one place: the names we write, and reading or removing them.

A pod placed by this webhook carries the selected-node and reservation
annotations, and either `spec.nodeName` (mode nodeName) or a node-affinity
term on `metadata.name` (mode nodeAffinity: required for pods a controller
recreates, preferred for the others). Admission writes these marks, the
reservation ledger and the cluster view read them, a reinvocation removes
them to decide afresh, and the conflict detector tells our placements from
other schedulers' by them. Pure functions on the wire dicts.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from webhook import bodies

DOMAIN: Final = "placement-webhook.io"
SCHEDULER_NAME: Final = "placement-webhook"
"""The schedulerName of pods handed to the fallback binder."""
DEFAULT_NAMESPACE: Final = "placement-webhook"
"""The namespace the webhook is installed in unless told otherwise (never placed)."""
MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
"""Kubernetes' mark of a static pod's mirror (the kubelet owns it, no scheduler places it)."""
DEFAULT_SCHEDULER: Final = "default-scheduler"
"""kube-scheduler's schedulerName, the one the API server gives a pod that names none."""
HANDLED_SCHEDULERS: Final = frozenset({"", DEFAULT_SCHEDULER, SCHEDULER_NAME})
"""Pods for these schedulerNames are ours to place, with the PlacementPolicy's profile."""
SELECTED_NODE: Final = f"{DOMAIN}/selected-node"
RESERVATION: Final = f"{DOMAIN}/reservation"
BOUND_BY: Final = f"{DOMAIN}/bound-by"
FILTER_RESULT: Final = f"{DOMAIN}/filter-result"
SCORE_RESULT: Final = f"{DOMAIN}/score-result"
FINALSCORE_RESULT: Final = f"{DOMAIN}/finalscore-result"
UNSCHEDULABLE: Final = f"{DOMAIN}/unschedulable"
SKIPPED: Final = f"{DOMAIN}/skipped"
HANDED_OFF: Final = f"{DOMAIN}/handed-off"

#: Pods whose controller recreates them when they are deleted, at no cost to the
#: workload: these are pinned with a *required* node affinity (and repaired by
#: deletion if the pinned node stops fitting); every other pod is steered with
#: a *preferred* one, so it can never be stranded on a node that filled up.
#: (Not Job: a deleted Job pod may count as a failure of the Job. The conflict
#: detector's RECREATING_CONTROLLERS, the owners eviction may recreate, is wider.)
PINNED_CONTROLLERS: Final = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
PREFERRED_WEIGHT: Final = 100
DECISION_ANNOTATIONS: Final = (
    SELECTED_NODE, RESERVATION, FILTER_RESULT, SCORE_RESULT, FINALSCORE_RESULT,
)  # fmt: skip


def pin(node: str) -> dict[str, Any]:
    """The node-field requirement that names one node."""
    return {"key": "metadata.name", "operator": "In", "values": [node]}


def controller_kind(pod: Mapping[str, Any]) -> str | None:
    controller = bodies.controller_of(pod)
    return None if controller is None else str(controller.get("kind") or "")


def pin_is_required(pod: Mapping[str, Any]) -> bool:
    """Whether nodeAffinity mode pins this pod (True) or only prefers the node (False)."""
    return controller_kind(pod) in PINNED_CONTROLLERS


def placed_by_us(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(node, reservation key) when an earlier call of ours placed this pod, else None.

    Our marks are the selected-node and reservation annotations; in nodeName
    mode the pod's nodeName must still be the node we chose (a later webhook
    that re-targets the pod makes it someone else's placement).
    """
    annotations = bodies.annotations_of(pod)
    node, key = annotations.get(SELECTED_NODE), annotations.get(RESERVATION)
    if not (isinstance(node, str) and node and isinstance(key, str) and key):
        return None
    bound = bodies.spec(pod).get("nodeName")
    if bound and bound != node:
        return None
    return node, key


def pinned_node(pod: Mapping[str, Any]) -> str | None:
    """The node this webhook pinned the pod to with a required term, or None.

    A pin is the selected-node annotation together with a required node
    affinity whose every term requires `metadata.name In [that node]`; the
    pod can then be bound nowhere else.
    """
    node = bodies.annotations_of(pod).get(SELECTED_NODE)
    if not isinstance(node, str) or not node:
        return None
    wanted = pin(node)
    affinity = (bodies.spec(pod).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and all(wanted in (t.get("matchFields") or []) for t in terms if isinstance(t, dict)):
        return node
    return None


def strip_affinity(affinity: Mapping[str, Any], node: str) -> dict[str, Any]:
    """`affinity` without the pin (required or preferred) that we added for `node`."""
    out = copy.deepcopy(dict(affinity))
    node_affinity = out.get("nodeAffinity")
    if not isinstance(node_affinity, dict):
        return out
    wanted = pin(node)
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, dict):
        terms = []
        for term in required.get("nodeSelectorTerms") or ():
            fields = [f for f in term.get("matchFields") or () if f != wanted]
            kept = {k: v for k, v in term.items() if k != "matchFields"}
            if fields:
                kept["matchFields"] = fields
            if kept:
                terms.append(kept)
        if terms:
            required["nodeSelectorTerms"] = terms
        else:
            del node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    if isinstance(preferred, list):
        ours = {"weight": PREFERRED_WEIGHT, "preference": {"matchFields": [wanted]}}
        rest = [p for p in preferred if p != ours]
        if rest:
            node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = rest
        else:
            del node_affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    if not node_affinity:
        del out["nodeAffinity"]
    return out


def without_placement(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod as it was before our earlier call placed it (nodeName, pin, annotations off)."""
    placed = placed_by_us(pod) or _pinned_only(pod)
    out = dict(pod)
    meta = dict(bodies.meta(pod))
    spec = dict(bodies.spec(pod))
    annotations = dict(bodies.annotations_of(pod))
    for key in DECISION_ANNOTATIONS:
        annotations.pop(key, None)
    meta["annotations"] = annotations
    if placed is not None:
        node = placed[0]
        if spec.get("nodeName") == node:
            del spec["nodeName"]
        if isinstance(spec.get("affinity"), dict):
            stripped = strip_affinity(spec["affinity"], node)
            if stripped:
                spec["affinity"] = stripped
            else:
                del spec["affinity"]
    out["metadata"], out["spec"] = meta, spec
    return out


def _pinned_only(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    node = pinned_node(pod)
    return (node, "") if node else None
