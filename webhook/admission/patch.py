"""JSONPatch and decision annotations for a placement decision.

Every annotation byte is stored in etcd and sent to every pod watcher, so the
detail is a PlacementPolicy setting (`decisionAnnotations`):
- summary (default): shaped like kube-scheduler-simulator's results but
  bounded: the filter result is a count of rejections by reason, and scores
  are kept for the few best nodes only (a few hundred bytes per pod);
- full: kube-scheduler-simulator's form, every evaluated node's filter results
  and every scored node's scores, unbounded (for debugging a policy: tens of
  KiB per pod at 1,000 nodes);
- minimal: only the selected node (plus the reservation and any
  unschedulable message the caller adds), the marks the cluster needs.
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
    "TOPOLOGY_LABELS",
    "UNSCHEDULABLE",
    "annotation_ops",
    "decision_annotations",
    "node_affinity_ops",
    "node_name_ops",
    "placed_by_us",
    "scheduler_name_ops",
    "topology_label_ops",
    "undo_placement_ops",
    "without_placement",
]
TOP_NODES = 5
#: The labels the API server's PodTopologyLabels admission copies from a pod's
#: node onto a pod created with spec.nodeName (its default configuration).
TOPOLOGY_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region")
MAX_ANNOTATION_BYTES = 1024


def _escape(key: str) -> str:
    """JSON Pointer escaping (RFC 6901) for a map key in a patch path."""
    return key.replace("~", "~0").replace("/", "~1")


def _bounded(value: Any) -> str:
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    if len(text) <= MAX_ANNOTATION_BYTES:
        return text
    return text[: MAX_ANNOTATION_BYTES - 3] + "..."


def decision_annotations(
    decision: Decision, detail: str = "summary", filters: tuple[str, ...] = ()
) -> dict[str, str]:
    """The annotations that explain a decision at `detail` (full | summary | minimal).

    `filters` (the profile's filter plugins, in order) lets the full form list
    the plugins a rejected node passed before the one that rejected it.
    """
    if detail == "minimal":
        return {} if decision.node is None else {SELECTED_NODE: decision.node}
    if detail == "full":
        return _full_annotations(decision, filters)
    notes: dict[str, str] = {}
    rejected = dict(sorted(decision.reason_counts.items(), key=lambda kv: (-kv[1], kv[0])))
    notes[FILTER_RESULT] = _bounded(
        {
            "evaluated": decision.evaluated_nodes,
            "feasible": decision.feasible_count,
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


def _full_annotations(decision: Decision, filters: tuple[str, ...]) -> dict[str, str]:
    """kube-scheduler-simulator's filter-result, score-result and finalscore-result."""
    passed = dict.fromkeys(filters, "passed")
    filtered: dict[str, dict[str, str]] = {node: dict(passed) for node in decision.feasible_nodes}
    for node, reasons in decision.node_reasons.items():
        plugin = decision.node_plugins.get(node, "")
        before = filters[: filters.index(plugin)] if plugin in filters else ()
        filtered[node] = {**dict.fromkeys(before, "passed"), plugin: "; ".join(reasons)}
    notes = {FILTER_RESULT: orjson.dumps(filtered, option=orjson.OPT_SORT_KEYS).decode()}
    if decision.node is not None:
        notes[SELECTED_NODE] = decision.node
    if decision.scores:
        raw = {n: {k: v for k, v in s.items() if k != "total"} for n, s in decision.scores.items()}
        weighted = {
            n: {k: v * decision.weights.get(k, 1) for k, v in s.items()} for n, s in raw.items()
        }
        notes[SCORE_RESULT] = orjson.dumps(raw, option=orjson.OPT_SORT_KEYS).decode()
        notes[FINALSCORE_RESULT] = orjson.dumps(weighted, option=orjson.OPT_SORT_KEYS).decode()
    return notes


def topology_label_ops(pod: Mapping[str, Any], labels: Mapping[str, str]) -> list[PatchOperation]:
    """Ops that set `labels` on the pod, creating metadata.labels when absent.

    Undoing a placement leaves them, as it leaves the ones PodTopologyLabels
    adds on the reinvocation pass; the binding that places the pod later
    overwrites them with its node's.
    """
    if not labels:
        return []
    existing = (pod.get("metadata") or {}).get("labels")
    if not isinstance(existing, dict):
        return [{"op": "add", "path": "/metadata/labels", "value": dict(labels)}]
    return [
        {"op": "add", "path": f"/metadata/labels/{_escape(k)}", "value": v}
        for k, v in labels.items()
        if existing.get(k) != v
    ]


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
