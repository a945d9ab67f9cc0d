"""Raw Node/Pod dicts shaped as the API server returns them, for conflict tests."""

from __future__ import annotations

from typing import Any

from webhook.conflicts.model import SELECTED_NODE_ANNOTATION, PodRecord
from webhook.policy.model import NodeView


def node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def nodes(*raw: dict[str, Any]) -> dict[str, NodeView]:
    views = [NodeView.from_dict(n) for n in raw]
    return {v.name: v for v in views}


def pod(
    name: str,
    on: str | None = None,
    *,
    cpu: str = "1",
    memory: str = "1Gi",
    at: str = "2024-05-01T10:00:00Z",
    rv: int = 100,
    by: str = "webhook",
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    owner: str | None = "ReplicaSet",
    phase: str = "Running",
    reason: str = "",
    terminating: bool = False,
    scheduler: str = "default-scheduler",
    bound_at: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pod bound to `on`, placed `by` webhook | binding | direct (nodeName at create)."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "labels": labels or {},
        "creationTimestamp": at,
        "resourceVersion": str(rv),
        "annotations": {},
        "managedFields": [
            {"manager": "kubectl", "operation": "Update",
             "fieldsV1": {"f:spec": {"f:containers": {}, "f:schedulerName": {}}}},
        ],
    }  # fmt: skip
    if on and by in ("webhook", "direct"):
        meta["managedFields"][0]["fieldsV1"]["f:spec"]["f:nodeName"] = {}
    if on and by == "webhook":
        meta["annotations"][SELECTED_NODE_ANNOTATION] = on
    if owner:
        meta["ownerReferences"] = [
            {"kind": owner, "name": f"{owner.lower()}-a", "uid": "owner-uid", "controller": True}
        ]
    if terminating:
        meta["deletionTimestamp"] = "2024-05-01T11:00:00Z"
    body: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {"name": "app", "image": "app:1",
             "resources": {"requests": {"cpu": cpu, "memory": memory}}}
        ],
        **spec,
    }  # fmt: skip
    if on:
        body["nodeName"] = on
    status: dict[str, Any] = {"phase": phase}
    if reason:
        status["reason"], status["message"] = reason, f"Pod was rejected: {reason}"
    if on and by == "binding":
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": bound_at or at}
        ]
    return {"metadata": meta, "spec": body, "status": status}


def records(*raw: dict[str, Any]) -> list[PodRecord]:
    return [PodRecord.from_dict(p) for p in raw]
