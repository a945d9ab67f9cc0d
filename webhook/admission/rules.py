"""Which pods the webhook places, and why it leaves the others alone.

Every rule that leaves a pod alone returns a short reason; the caller puts it
in the response's audit annotation and warnings so an operator can see why a
pod was not placed. The order matters only for which reason is reported.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from webhook import bodies
from webhook.policy import marks
from webhook.policy.marks import SCHEDULER_NAME as SCHEDULER_NAME  # webhook.demo imports it here
from webhook.policy.placement_policy import Mode

SKIP_LABEL = f"{marks.DOMAIN}/skip"
ENABLED_LABEL = f"{marks.DOMAIN}/enabled"
MIRROR_ANNOTATION = marks.MIRROR_ANNOTATION
PROTECTED_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})


def why_not_handled(
    pod: Mapping[str, Any],
    namespace: str,
    *,
    own_namespace: str,
    mode: Mode,
    namespace_labels: Mapping[str, str] | None,
    excluded_namespaces: Collection[str] = PROTECTED_NAMESPACES,
) -> tuple[str, str] | None:
    """(category, reason) when this pod is not ours to place, None when it is.

    The category is a fixed word for metrics; the reason is for people.
    `namespace_labels` None: the opt-in label is not checked here (the API
    server's namespaceSelector is the authority; see PlacerSettings).
    """
    spec = bodies.spec(pod)
    if namespace in excluded_namespaces or namespace == own_namespace:
        return "excluded-namespace", f"namespace {namespace} is excluded"
    if namespace_labels is not None and namespace_labels.get(ENABLED_LABEL) != "true":
        return (
            "namespace-not-enabled",
            f"namespace {namespace} is not labelled {ENABLED_LABEL}=true",
        )
    if spec.get("nodeName"):
        return "has-node-name", "pod already has spec.nodeName"
    if MIRROR_ANNOTATION in bodies.annotations_of(pod):
        return "mirror-pod", "mirror (static) pod"
    owners = bodies.meta(pod).get("ownerReferences") or []
    if any(ref.get("kind") == "DaemonSet" and ref.get("controller") for ref in owners):
        return "daemonset-pod", "DaemonSet pod (placed by the DaemonSet controller)"
    if bodies.labels_of(pod).get(SKIP_LABEL) == "true":
        return "opted-out", f"pod labelled {SKIP_LABEL}=true"
    scheduler = spec.get("schedulerName") or ""
    if scheduler not in marks.HANDLED_SCHEDULERS:
        return "other-scheduler", f"pod is for scheduler {scheduler!r}"
    if mode is Mode.NODE_NAME and spec.get("schedulingGates"):
        return "scheduling-gates", "pod has scheduling gates (nodeName would bypass them)"
    return None
