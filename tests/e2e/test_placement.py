"""The webhook placing pods through the real kube-apiserver (nodeName mode)."""

from __future__ import annotations

import orjson
import pytest

from tests.e2e.conftest import Nodes, wait_for
from webhook.admission.patch import FILTER_RESULT, RESERVATION, SELECTED_NODE, UNSCHEDULABLE
from webhook.devcluster.objects import ensure_namespace, pod_manifest
from webhook.devcluster.webhook import WebhookProcess
from webhook.kube import ApiError, Kube

pytestmark = pytest.mark.e2e


def create_pod(kube: Kube, namespace: str, pod: dict, **params: str) -> dict:
    return kube.create(f"/api/v1/namespaces/{namespace}/pods", pod, **params)


def stored(kube: Kube, namespace: str, name: str) -> dict:
    return kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")


def reservations(hook: WebhookProcess) -> float:
    for line in hook.metrics().splitlines():
        if line.startswith("placement_webhook_reservations "):
            return float(line.split()[1])
    raise AssertionError("no reservations gauge in /metrics")


def test_pod_in_opted_in_namespace_is_persisted_on_a_node_that_fits(
    kube: Kube, nodes: Nodes, namespace: str
) -> None:
    nodes.add(cpu="1", memory="1Gi")
    roomy = nodes.add(cpu="8", memory="16Gi")

    create_pod(kube, namespace, pod_manifest("app", cpu="2", memory="1Gi"))

    pod = stored(kube, namespace, "app")
    assert pod["spec"]["nodeName"] == roomy
    annotations = pod["metadata"]["annotations"]
    assert annotations[SELECTED_NODE] == roomy
    # Both nodes were evaluated; the one rejected (the small one) for cpu.
    assert orjson.loads(annotations[FILTER_RESULT]) == {
        "evaluated": 2,
        "feasible": 1,
        "rejected": {"Insufficient cpu": 1},
    }


def test_pods_fill_the_least_allocated_node_first(kube: Kube, nodes: Nodes, namespace: str) -> None:
    first, second = nodes.add(cpu="4"), nodes.add(cpu="4")
    placed = [
        create_pod(kube, namespace, pod_manifest(f"p{i}", cpu="1"))["spec"]["nodeName"]
        for i in range(4)
    ]
    assert sorted(placed) == sorted([first, first, second, second])


def test_pod_in_namespace_without_the_label_is_untouched(kube: Kube, nodes: Nodes) -> None:
    nodes.add(cpu="8")
    ensure_namespace(kube, "not-opted-in")

    pod = create_pod(kube, "not-opted-in", pod_manifest(generate_name="plain-"))

    assert "nodeName" not in pod["spec"]
    assert not any(
        k.startswith("placement-webhook.io/") for k in pod["metadata"].get("annotations", {})
    )


def test_generate_name_pod_is_placed(kube: Kube, nodes: Nodes, namespace: str) -> None:
    node = nodes.add(cpu="2")

    pod = create_pod(kube, namespace, pod_manifest(generate_name="gen-"))

    assert pod["metadata"]["name"].startswith("gen-")
    assert pod["spec"]["nodeName"] == node
    assert stored(kube, namespace, pod["metadata"]["name"])["spec"]["nodeName"] == node


def test_pod_that_fits_no_node_is_admitted_unplaced_with_the_reason(
    kube: Kube, nodes: Nodes, namespace: str
) -> None:
    nodes.add(cpu="2")
    nodes.add(cpu="1", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])

    pod = create_pod(kube, namespace, pod_manifest("huge", cpu="64"))

    assert "nodeName" not in pod["spec"]
    reason = stored(kube, namespace, "huge")["metadata"]["annotations"][UNSCHEDULABLE]
    assert reason.startswith("0/2 nodes are available:")
    assert "Insufficient cpu" in reason


def test_server_side_dry_run_leaves_no_pod_and_no_reservation(
    kube: Kube, nodes: Nodes, namespace: str, webhook: WebhookProcess
) -> None:
    node = nodes.add(cpu="1", pods=110)
    before = reservations(webhook)

    answer = create_pod(kube, namespace, pod_manifest("dry", cpu="1"), dryRun="All")

    assert answer["spec"]["nodeName"] == node  # the answer shows the decision...
    assert RESERVATION not in answer["metadata"]["annotations"]
    with pytest.raises(ApiError) as missing:  # ...but nothing was persisted
        stored(kube, namespace, "dry")
    assert missing.value.is_not_found
    assert reservations(webhook) == before
    # The whole node is still free: a real pod needing all of it is placed there.
    real = create_pod(kube, namespace, pod_manifest("real", cpu="1"))
    assert real["spec"]["nodeName"] == node


def test_reservation_is_released_when_the_watch_delivers_the_pod(
    kube: Kube, nodes: Nodes, namespace: str, webhook: WebhookProcess
) -> None:
    nodes.add(cpu="2")
    before = reservations(webhook)

    create_pod(kube, namespace, pod_manifest("watched", cpu="1"))

    wait_for(lambda: reservations(webhook) == before, message="reservation to turn into the pod")
