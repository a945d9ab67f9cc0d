"""Whole clusters of API objects into a snapshot: a `kubectl get -o json` List, or lists.

The edge where a cluster dump (`explain --snapshot`, `serve --snapshot`) and
test fixtures meet the index store: every object is parsed into its view
(webhook.policy.model) here, and the snapshot only ever sees views.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.policy.model import NamespaceView, NodeView, PodView
from webhook.policy.snapshot import ClusterSnapshot
from webhook.policy.workloads import WORKLOAD_KINDS, WorkloadView

__all__ = ["build_snapshot", "snapshot_from_list"]


def build_snapshot(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    namespaces: Iterable[Mapping[str, Any]] = (),
) -> ClusterSnapshot:
    """A snapshot of these Node, Pod and Namespace objects (raises ValueError on bad ones)."""
    snap = ClusterSnapshot()
    for ns in namespaces:
        snap.upsert_namespace(NamespaceView.from_dict(ns))
    for n in nodes:
        snap.upsert_node(NodeView.from_dict(n))
    for p in pods:
        snap.upsert_pod(PodView.from_dict(p))
    return snap


def snapshot_from_list(doc: Mapping[str, Any]) -> ClusterSnapshot:
    """From a `kubectl get nodes,pods[,namespaces,services,replicasets,...] -A -o json` List."""
    items = doc.get("items")
    if not isinstance(items, list):
        raise ValueError("snapshot must be a v1 List with an 'items' array")
    nodes, pods, nss, workloads = [], [], [], []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ValueError(f"items[{i}] is not an object")
        kind = item.get("kind")
        if kind == "Node":
            nodes.append(item)
        elif kind == "Pod":
            pods.append(item)
        elif kind == "Namespace":
            nss.append(item)
        elif kind in WORKLOAD_KINDS:
            workloads.append(item)
    snap = build_snapshot(nodes, pods, nss)
    for item in workloads:
        snap.workloads.upsert(WorkloadView.from_dict(str(item["kind"]), item))
    return snap
