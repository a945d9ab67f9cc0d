"""Objects for the local control plane: kubelet-less nodes, namespaces, pods.

A Node created through the API has no kubelet behind it; its status
(capacity, allocatable, Ready) is written through the status subresource so
schedulers see a ready node with the given size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.kube import ApiError, Kube


def node_manifest(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, str]] = (),
    extended: Mapping[str, str] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    capacity = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi"}
    capacity.update(extended or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
        },
        "spec": {"taints": list(taints), "unschedulable": unschedulable},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "placement-webhook devcluster node (no kubelet)",
                }
            ],
            "addresses": [{"type": "Hostname", "address": name}],
        },
    }


def create_node(kube: Kube, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Create the node, then write its status (create drops a client-set status)."""
    created = kube.create("/api/v1/nodes", {**manifest, "status": {}})
    name = manifest["metadata"]["name"]
    return (
        kube.patch_merge(f"/api/v1/nodes/{name}/status", {"status": manifest.get("status", {})})
        or created
    )


def ensure_namespace(kube: Kube, name: str, labels: Mapping[str, str] | None = None) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": dict(labels or {})},
    }
    try:
        kube.create("/api/v1/namespaces", body)
    except ApiError as err:
        if err.status != 409:
            raise
        kube.patch_merge(f"/api/v1/namespaces/{name}", {"metadata": {"labels": dict(labels or {})}})


def pod_manifest(
    name: str | None = None,
    *,
    cpu: str = "100m",
    memory: str = "128Mi",
    generate_name: str | None = None,
    labels: Mapping[str, str] | None = None,
    scheduler_name: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": dict(labels or {})}
    if name:
        meta["name"] = name
    if generate_name:
        meta["generateName"] = generate_name
    pod_spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
        **spec,
    }
    if scheduler_name:
        pod_spec["schedulerName"] = scheduler_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}
