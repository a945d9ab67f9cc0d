"""Raw Node/Pod dicts and ExtenderArgs bodies, shaped as kube-scheduler sends them."""

from __future__ import annotations

from typing import Any

import orjson

from webhook.policy.dump import build_snapshot
from webhook.policy.policy_file import load_policy
from webhook.policy.profile import Profile
from webhook.policy.snapshot import ClusterSnapshot


def node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def pod(
    name: str,
    cpu: str = "100m",
    memory: str = "128Mi",
    node_name: str | None = None,
    uid: str | None = None,
    namespace: str = "ns",
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "img",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
        **spec,
    }
    if node_name:
        body["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid if uid is not None else f"uid-{name}",
            "labels": labels or {},
        },
        "spec": body,
        "status": {"phase": "Pending" if node_name is None else "Running"},
    }


def snapshot(nodes: list[dict[str, Any]], pods: list[dict[str, Any]] = ()) -> ClusterSnapshot:  # type: ignore[assignment]
    return build_snapshot(nodes, pods)


def profile(body: str = "") -> Profile:
    """The default-scheduler profile of a KubeSchedulerConfiguration (`body`: profile YAML)."""
    text = (
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "profiles:\n"
        "  - schedulerName: default-scheduler\n"
        "    percentageOfNodesToScore: 100\n" + body
    )
    return load_policy(text).default_profile


def args_body(
    the_pod: dict[str, Any],
    nodes: list[dict[str, Any]],
    *,
    cache_capable: bool = True,
    lower_case: bool = False,
) -> bytes:
    """ExtenderArgs exactly as kube-scheduler's json.Marshal writes it (nil pointer -> null).

    `lower_case` writes the keys some extender libraries use ("pod", "nodenames").
    """
    names = [n["metadata"]["name"] for n in nodes]
    data: dict[str, Any] = {
        "Pod": the_pod,
        "Nodes": None if cache_capable else {"metadata": {}, "items": nodes},
        "NodeNames": names if cache_capable else None,
    }
    if lower_case:
        data = {"pod": data["Pod"], "nodes": data["Nodes"], "nodenames": data["NodeNames"]}
    return orjson.dumps(data)
