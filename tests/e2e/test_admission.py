"""Admission edge cases through the real kube-apiserver: skips, concurrency, events."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.conftest import Nodes, wait_for
from webhook.admission.patch import SELECTED_NODE, SKIPPED, UNSCHEDULABLE
from webhook.devcluster.objects import pod_manifest
from webhook.devcluster.webhook import DEPLOYED_REPLICAS
from webhook.kube import Kube

pytestmark = pytest.mark.e2e


def create(kube: Kube, namespace: str, pod: dict) -> tuple[dict, list[str]]:
    return kube.create_with_warnings(f"/api/v1/namespaces/{namespace}/pods", pod)


@pytest.mark.parametrize(
    ("pod", "warning"),
    [
        (pod_manifest("opted-out", labels={"placement-webhook.io/skip": "true"}),
         "labelled placement-webhook.io/skip=true"),
        (pod_manifest("other-scheduler", scheduler_name="volcano"), "for scheduler 'volcano'"),
        (pod_manifest("gated", schedulingGates=[{"name": "example.com/wait"}]),
         "scheduling gates"),
        ({**pod_manifest("ds-pod"), "metadata": {"name": "ds-pod", "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "controller": True,
            "uid": "0f0e3a4c-7d0b-4d8e-9b9a-2f1f5b0c1a11"}]}}, "DaemonSet pod"),
        (pod_manifest("claims", volumes=[{"name": "d", "persistentVolumeClaim": {
            "claimName": "data"}}]), "not placed"),
    ],
)  # fmt: skip
# Mirror pods are not here: the API server requires them to carry spec.nodeName,
# so the matchCondition keeps them away (the rule itself is unit tested).
def test_pods_that_are_not_ours_are_admitted_untouched_with_a_warning(
    kube: Kube, nodes: Nodes, namespace: str, pod: dict, warning: str
) -> None:
    nodes.add(cpu="8")

    created, warnings = create(kube, namespace, pod)

    assert "nodeName" not in created["spec"]
    assert any(warning in w for w in warnings), warnings
    assert SELECTED_NODE not in (created["metadata"].get("annotations") or {})


def test_pod_the_policy_cannot_evaluate_says_why_in_an_annotation(
    kube: Kube, nodes: Nodes, namespace: str
) -> None:
    nodes.add(cpu="8")
    pvc = {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}

    created, _ = create(kube, namespace, pod_manifest("with-pvc", volumes=[pvc]))

    assert "PersistentVolumeClaim" in created["metadata"]["annotations"][SKIPPED]
    assert created["spec"]["schedulerName"] == "default-scheduler"


def test_pod_with_node_name_never_reaches_the_webhook(
    kube: Kube, nodes: Nodes, namespace: str
) -> None:
    node = nodes.add(cpu="1")
    pinned = pod_manifest("pinned", cpu="4", nodeName=node)  # more than the node has

    created, warnings = create(kube, namespace, pinned)

    assert created["spec"]["nodeName"] == node
    assert not created["metadata"].get("annotations")
    assert warnings == []  # the matchCondition kept the request away from us


def test_unschedulable_pod_is_handed_to_the_reconciler(
    kube: Kube, nodes: Nodes, namespace: str
) -> None:
    nodes.add(cpu="1")

    created, warnings = create(kube, namespace, pod_manifest("too-big", cpu="2"))

    assert created["spec"]["schedulerName"] == "placement-webhook"
    assert created["metadata"]["annotations"][UNSCHEDULABLE] == (
        "0/1 nodes are available: 1 Insufficient cpu."
    )
    assert any("0/1 nodes are available" in w for w in warnings)


def test_two_hundred_concurrent_creates_never_overcommit_a_node(
    kube: Kube, nodes: Nodes, namespace: str
) -> None:
    """As deployed: the replicas the deploy ships, behind one Service address."""
    assert nodes.hook is not None
    assert len(nodes.hook.replicas) == DEPLOYED_REPLICAS
    names = [nodes.add(cpu="20", memory="64Gi") for _ in range(10)]  # room for exactly 200

    def admit(i: int) -> str | None:
        pod = kube.create(f"/api/v1/namespaces/{namespace}/pods", pod_manifest(f"c{i}", cpu="1"))
        return pod["spec"].get("nodeName")

    with ThreadPoolExecutor(max_workers=16) as pool:
        placed = list(pool.map(admit, range(210)))

    per_node = Counter(n for n in placed if n)
    assert sum(per_node.values()) == 200
    assert set(per_node) == set(names)
    assert max(per_node.values()) == 20
    # An independent recount from the API agrees.
    stored = kube.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    assert (
        Counter(p["spec"].get("nodeName") for p in stored if p["spec"].get("nodeName")) == per_node
    )
    assert all(r.process.poll() is None for r in nodes.hook.replicas), "a replica died"


def test_scheduled_event_is_written_for_a_placed_pod(
    kube: Kube, nodes: Nodes, namespace: str
) -> None:
    node = nodes.add(cpu="2")
    create(kube, namespace, pod_manifest("announced"))

    def scheduled_events() -> list[dict]:
        events = kube.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
        return [e for e in events if e["reason"] == "Scheduled"]

    events = wait_for(scheduled_events, message="a Scheduled event")
    assert events[0]["note"] == f"Successfully assigned {namespace}/announced to {node}"
    assert events[0]["reportingController"] == "placement-webhook"
    assert events[0]["regarding"]["name"] == "announced"
    assert events[0]["type"] == "Normal"
