"""JSONPatch and decision annotations for a placement decision.

Annotations are shaped like kube-scheduler-simulator's results but bounded:
the filter result is a count of rejections by reason, and scores are kept for
the few best nodes only, so a 5,000-node cluster does not produce a 1 MiB pod.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import orjson

from webhook.admission.review import PatchOperation
from webhook.policy.framework import Decision

DOMAIN = "placement-webhook.io"
SELECTED_NODE = f"{DOMAIN}/selected-node"
FILTER_RESULT = f"{DOMAIN}/filter-result"
SCORE_RESULT = f"{DOMAIN}/score-result"
FINALSCORE_RESULT = f"{DOMAIN}/finalscore-result"
UNSCHEDULABLE = f"{DOMAIN}/unschedulable"
SKIPPED = f"{DOMAIN}/skipped"
RESERVATION = f"{DOMAIN}/reservation"
DEFERRED = f"{DOMAIN}/handed-off"
TOP_NODES = 5
MAX_ANNOTATION_BYTES = 1024


def _escape(key: str) -> str:
    """JSON Pointer escaping (RFC 6901) for a map key in a patch path."""
    return key.replace("~", "~0").replace("/", "~1")


def _bounded(value: Any) -> str:
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    if len(text) <= MAX_ANNOTATION_BYTES:
        return text
    return text[: MAX_ANNOTATION_BYTES - 3] + "..."


def decision_annotations(decision: Decision) -> dict[str, str]:
    """The annotations that explain a decision, a few KiB at most."""
    notes: dict[str, str] = {}
    rejected = dict(sorted(decision.reason_counts.items(), key=lambda kv: (-kv[1], kv[0])))
    notes[FILTER_RESULT] = _bounded(
        {
            "evaluated": decision.evaluated_nodes,
            "feasible": len(decision.feasible_nodes),
            "rejected": rejected,
        }
    )
    if decision.node is not None:
        notes[SELECTED_NODE] = decision.node
    if decision.best_scores:
        best = decision.best_scores[:TOP_NODES]
        notes[SCORE_RESULT] = _bounded(
            {node: {k: v for k, v in s.items() if k != "total"} for node, s in best}
        )
        notes[FINALSCORE_RESULT] = _bounded({node: s.get("total", 0) for node, s in best})
    return notes


def annotation_ops(pod: Mapping[str, Any], annotations: Mapping[str, str]) -> list[PatchOperation]:
    """Ops that set `annotations`, creating metadata.annotations when absent."""
    if not annotations:
        return []
    existing = (pod.get("metadata") or {}).get("annotations")
    if not isinstance(existing, dict):
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(annotations)}]
    return [
        {"op": "add", "path": f"/metadata/annotations/{_escape(k)}", "value": v}
        for k, v in annotations.items()
    ]


def node_name_ops(node: str) -> list[PatchOperation]:
    return [{"op": "add", "path": "/spec/nodeName", "value": node}]


#: Pods whose controller recreates them when they are deleted, at no cost to the
#: workload: these are pinned with a *required* node affinity (and repaired by
#: deletion if the pinned node stops fitting); every other pod is steered with
#: a *preferred* one, so it can never be stranded on a node that filled up.
RECREATING_CONTROLLERS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
PREFERRED_WEIGHT = 100


def _pin(node: str) -> dict[str, Any]:
    return {"key": "metadata.name", "operator": "In", "values": [node]}


def pin_is_required(pod: Mapping[str, Any]) -> bool:
    """Whether nodeAffinity mode pins this pod (True) or only prefers the node (False)."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller"):
            return ref.get("kind") in RECREATING_CONTROLLERS
    return False


def node_affinity_ops(pod: Mapping[str, Any], node: str) -> list[PatchOperation]:
    """Pin (or prefer) `node` by `metadata.name` while keeping every existing requirement.

    Required node selector terms are ORed, so the node field requirement is
    added to each existing term (ANDed inside it): the chosen node must still
    satisfy every term it satisfied. With no terms, one term is created. A
    preferred pin is one more preferred term of weight 100.
    """
    spec = pod.get("spec") or {}
    affinity = copy.deepcopy(spec.get("affinity") or {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    pin = _pin(node)
    if pin_is_required(pod):
        required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        terms = required.get("nodeSelectorTerms") or [{}]
        for term in terms:
            fields = [f for f in term.get("matchFields") or [] if f != pin]
            term["matchFields"] = [*fields, pin]
        required["nodeSelectorTerms"] = terms
    else:
        preferred = node_affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
        preferred.append({"weight": PREFERRED_WEIGHT, "preference": {"matchFields": [pin]}})
    return [{"op": "add", "path": "/spec/affinity", "value": affinity}]


def placed_by_us(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(node, reservation key) when an earlier call of ours placed this pod, else None.

    Our marks are the selected-node and reservation annotations; in nodeName
    mode the pod's nodeName must still be the node we chose (a later webhook
    that re-targets the pod makes it someone else's placement).
    """
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if not isinstance(annotations, dict):
        return None
    node, key = annotations.get(SELECTED_NODE), annotations.get(RESERVATION)
    if not (isinstance(node, str) and node and isinstance(key, str) and key):
        return None
    bound = (pod.get("spec") or {}).get("nodeName")
    if bound and bound != node:
        return None
    return node, key


_OUR_ANNOTATIONS = (SELECTED_NODE, RESERVATION, FILTER_RESULT, SCORE_RESULT, FINALSCORE_RESULT)


def _strip_affinity(affinity: Mapping[str, Any], node: str) -> dict[str, Any]:
    """`affinity` without the pin (required or preferred) that we added for `node`."""
    out = copy.deepcopy(dict(affinity))
    node_affinity = out.get("nodeAffinity")
    if not isinstance(node_affinity, dict):
        return out
    pin = _pin(node)
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, dict):
        terms = []
        for term in required.get("nodeSelectorTerms") or ():
            fields = [f for f in term.get("matchFields") or () if f != pin]
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
        ours = {"weight": PREFERRED_WEIGHT, "preference": {"matchFields": [pin]}}
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
    placed = placed_by_us(pod)
    out = dict(pod)
    meta = dict(pod.get("metadata") or {})
    spec = dict(pod.get("spec") or {})
    annotations = dict(meta.get("annotations") or {})
    for key in _OUR_ANNOTATIONS:
        annotations.pop(key, None)
    meta["annotations"] = annotations
    if placed is not None:
        node = placed[0]
        if spec.get("nodeName") == node:
            del spec["nodeName"]
        if isinstance(spec.get("affinity"), dict):
            stripped = _strip_affinity(spec["affinity"], node)
            if stripped:
                spec["affinity"] = stripped
            else:
                del spec["affinity"]
    out["metadata"], out["spec"] = meta, spec
    return out


def undo_placement_ops(pod: Mapping[str, Any]) -> list[PatchOperation]:
    """Ops that take our earlier placement off the pod (before placing it afresh, or not)."""
    placed = placed_by_us(pod)
    if placed is None:
        return []
    node = placed[0]
    spec = pod.get("spec") or {}
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    ops: list[PatchOperation] = [
        {"op": "remove", "path": f"/metadata/annotations/{_escape(k)}"}
        for k in _OUR_ANNOTATIONS
        if k in annotations
    ]
    if spec.get("nodeName") == node:
        ops.append({"op": "remove", "path": "/spec/nodeName"})
    affinity = spec.get("affinity")
    if isinstance(affinity, dict):
        stripped = _strip_affinity(affinity, node)
        if stripped != affinity:
            if stripped:
                ops.append({"op": "add", "path": "/spec/affinity", "value": stripped})
            else:
                ops.append({"op": "remove", "path": "/spec/affinity"})
    return ops


def scheduler_name_ops(name: str) -> list[PatchOperation]:
    return [{"op": "add", "path": "/spec/schedulerName", "value": name}]
