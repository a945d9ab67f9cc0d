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

from webhook import bodies
from webhook.admission.review import PatchOperation
from webhook.policy.framework import Decision
from webhook.policy.marks import (
    DECISION_ANNOTATIONS,
    FILTER_RESULT,
    FINALSCORE_RESULT,
    PREFERRED_WEIGHT,
    RESERVATION,
    SCORE_RESULT,
    SELECTED_NODE,
    SKIPPED,
    UNSCHEDULABLE,
    pin,
    pin_is_required,
    placed_by_us,
    strip_affinity,
    without_placement,
)

__all__ = [
    "FILTER_RESULT",
    "FINALSCORE_RESULT",
    "RESERVATION",
    "SCORE_RESULT",
    "SELECTED_NODE",
    "SKIPPED",
    "UNSCHEDULABLE",
    "annotation_ops",
    "decision_annotations",
    "node_affinity_ops",
    "node_name_ops",
    "placed_by_us",
    "scheduler_name_ops",
    "undo_placement_ops",
    "without_placement",
]
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
    existing = bodies.meta(pod).get("annotations")
    if not isinstance(existing, dict):
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(annotations)}]
    return [
        {"op": "add", "path": f"/metadata/annotations/{_escape(k)}", "value": v}
        for k, v in annotations.items()
    ]


def node_name_ops(node: str) -> list[PatchOperation]:
    return [{"op": "add", "path": "/spec/nodeName", "value": node}]


def node_affinity_ops(pod: Mapping[str, Any], node: str) -> list[PatchOperation]:
    """Pin (or prefer) `node` by `metadata.name` while keeping every existing requirement.

    Required node selector terms are ORed, so the node field requirement is
    added to each existing term (ANDed inside it): the chosen node must still
    satisfy every term it satisfied. With no terms, one term is created. A
    preferred pin is one more preferred term of weight 100.
    """
    affinity = copy.deepcopy(bodies.spec(pod).get("affinity") or {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    wanted = pin(node)
    if pin_is_required(pod):
        required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        terms = required.get("nodeSelectorTerms") or [{}]
        for term in terms:
            fields = [f for f in term.get("matchFields") or [] if f != wanted]
            term["matchFields"] = [*fields, wanted]
        required["nodeSelectorTerms"] = terms
    else:
        preferred = node_affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
        preferred.append({"weight": PREFERRED_WEIGHT, "preference": {"matchFields": [wanted]}})
    return [{"op": "add", "path": "/spec/affinity", "value": affinity}]


def undo_placement_ops(pod: Mapping[str, Any]) -> list[PatchOperation]:
    """Ops that take our earlier placement off the pod (before placing it afresh, or not)."""
    placed = placed_by_us(pod)
    if placed is None:
        return []
    node = placed[0]
    spec = bodies.spec(pod)
    annotations = bodies.annotations_of(pod)
    ops: list[PatchOperation] = [
        {"op": "remove", "path": f"/metadata/annotations/{_escape(k)}"}
        for k in DECISION_ANNOTATIONS
        if k in annotations
    ]
    if spec.get("nodeName") == node:
        ops.append({"op": "remove", "path": "/spec/nodeName"})
    affinity = spec.get("affinity")
    if isinstance(affinity, dict):
        stripped = strip_affinity(affinity, node)
        if stripped != affinity:
            if stripped:
                ops.append({"op": "add", "path": "/spec/affinity", "value": stripped})
            else:
                ops.append({"op": "remove", "path": "/spec/affinity"})
    return ops


def scheduler_name_ops(name: str) -> list[PatchOperation]:
    return [{"op": "add", "path": "/spec/schedulerName", "value": name}]
