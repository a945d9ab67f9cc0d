"""Which pods the webhook leaves alone, and why."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.admission.rules import why_not_handled
from webhook.policy.placement_policy import Mode

OPTED_IN = {"placement-webhook.io/enabled": "true"}


def pod(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": "p", "labels": {}, "annotations": {}}, "spec": {}}
    for path, value in changes.items():
        section, field = path.split("__")
        body[section][field] = value
    return body


def decide(p: dict[str, Any], namespace: str = "apps", mode: str = "nodeName",
           labels: dict[str, str] | None = OPTED_IN) -> str | None:  # fmt: skip
    answer = why_not_handled(p, namespace, own_namespace="placement-webhook", mode=Mode(mode),
                             namespace_labels=labels)  # fmt: skip
    return None if answer is None else answer[0]


def test_plain_pod_in_opted_in_namespace_is_handled() -> None:
    assert decide(pod()) is None


def test_pod_for_default_or_our_scheduler_is_handled() -> None:
    assert decide(pod(spec__schedulerName="default-scheduler")) is None
    assert decide(pod(spec__schedulerName="placement-webhook")) is None


def test_unknown_namespace_labels_do_not_block_placement() -> None:
    # With a snapshot lacking namespaces the webhook relies on the namespaceSelector.
    assert decide(pod(), labels=None) is None


@pytest.mark.parametrize(
    ("the_pod", "namespace", "labels", "mode", "category"),
    [
        (pod(), "kube-system", OPTED_IN, "nodeName", "excluded-namespace"),
        (pod(), "placement-webhook", OPTED_IN, "nodeName", "excluded-namespace"),
        (pod(), "apps", {}, "nodeName", "namespace-not-enabled"),
        (pod(), "apps", {"placement-webhook.io/enabled": "false"}, "nodeName",
         "namespace-not-enabled"),
        (pod(spec__nodeName="n1"), "apps", OPTED_IN, "nodeName", "has-node-name"),
        (pod(metadata__annotations={"kubernetes.io/config.mirror": "x"}), "apps", OPTED_IN,
         "nodeName", "mirror-pod"),
        (pod(metadata__ownerReferences=[{"kind": "DaemonSet", "controller": True, "name": "d"}]),
         "apps", OPTED_IN, "nodeName", "daemonset-pod"),
        (pod(metadata__labels={"placement-webhook.io/skip": "true"}), "apps", OPTED_IN,
         "nodeName", "opted-out"),
        (pod(spec__schedulerName="volcano"), "apps", OPTED_IN, "nodeName", "other-scheduler"),
        (pod(spec__schedulingGates=[{"name": "g"}]), "apps", OPTED_IN, "nodeName",
         "scheduling-gates"),
    ],
)  # fmt: skip
def test_pods_that_are_not_ours_are_left_alone_with_a_reason(
    the_pod: dict[str, Any], namespace: str, labels: dict[str, str], mode: str, category: str
) -> None:
    assert decide(the_pod, namespace, mode, labels) == category


def test_daemonset_owner_that_is_not_the_controller_does_not_count() -> None:
    owned = pod(metadata__ownerReferences=[{"kind": "DaemonSet", "controller": False}])
    assert decide(owned) is None


def test_scheduling_gates_are_fine_in_node_affinity_mode() -> None:
    # The scheduler still honours the gates; we only add an affinity.
    assert decide(pod(spec__schedulingGates=[{"name": "g"}]), mode="nodeAffinity") is None
