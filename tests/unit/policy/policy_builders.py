"""Small builders for raw Node/Pod dicts used across the policy tests."""

from __future__ import annotations

from typing import Any

from webhook.policy.dump import build_snapshot
from webhook.policy.framework import Decision, schedule
from webhook.policy.model import PodView
from webhook.policy.policy_file import default_policy, load_policy
from webhook.policy.profile import Profile
from webhook.policy.snapshot import ClusterSnapshot


def make_node(
    name: str,
    cpu: str | int = "4",
    memory: str = "8Gi",
    pods: str | int = "110",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    extra: dict[str, str] | None = None,
    images: list[tuple[list[str], int]] | None = None,
) -> dict[str, Any]:
    alloc: dict[str, Any] = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": {"allocatable": alloc, "capacity": alloc},
    }
    if taints:
        node["spec"]["taints"] = taints
    if unschedulable:
        node["spec"]["unschedulable"] = True
    if images:
        node["status"]["images"] = [{"names": n, "sizeBytes": s} for n, s in images]
    return node


def make_pod(
    name: str,
    cpu: str | None = None,
    memory: str | None = None,
    node: str | None = None,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    requests: dict[str, str] | None = None,
    image: str = "registry.example/app:1",
    phase: str = "Running",
    uid: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    reqs: dict[str, Any] = dict(requests or {})
    if cpu is not None:
        reqs["cpu"] = cpu
    if memory is not None:
        reqs["memory"] = memory
    container: dict[str, Any] = {"name": "app", "image": image}
    if reqs:
        container["resources"] = {"requests": reqs}
    body: dict[str, Any] = {"containers": [container], **spec}
    if node is not None:
        body["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid if uid is not None else f"uid-{namespace}-{name}",
            "labels": labels or {},
        },
        "spec": body,
        "status": {"phase": phase},
    }


def snapshot(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]] = (), namespaces: Any = ()
) -> ClusterSnapshot:  # type: ignore[assignment]
    return build_snapshot(nodes, pods, namespaces)


def default_profile() -> Profile:
    return default_policy().default_profile


def profile_with(plugins_yaml: str) -> Profile:
    """A profile from a `profiles[0]` body given as YAML (indented by 4)."""
    text = (
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "profiles:\n"
        "  - schedulerName: default-scheduler\n" + plugins_yaml
    )
    return load_policy(text).default_profile


def only(*filters: str, scores: dict[str, int] | None = None, args: str = "") -> Profile:
    """A profile with exactly these filter plugins and score plugins (weights)."""
    lines = ["    plugins:", "      multiPoint:", "        disabled: [{name: '*'}]"]
    if filters:
        lines += ["      filter:", "        enabled:"] + [f"          - name: {f}" for f in filters]
    if scores:
        lines += ["      score:", "        enabled:"] + [
            f"          - {{name: {s}, weight: {w}}}" for s, w in scores.items()
        ]
    text = "\n".join(lines) + "\n"
    if args:
        text += args
    return profile_with(text)


def place(pod: dict[str, Any], snap: ClusterSnapshot, profile: Profile | None = None) -> Decision:
    return schedule(PodView.from_dict(pod), snap, profile or default_profile())


def plugin_args(name: str, body: str) -> str:
    """A `pluginConfig` block for one plugin; `body` is the args as YAML (any indent)."""
    import textwrap

    args = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 10)
    return f"    pluginConfig:\n      - name: {name}\n        args:\n{args}\n"
