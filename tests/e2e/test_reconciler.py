"""The fallback reconciler against a real control plane: it binds what admission left pending.

Its own control plane (module scope), so a stopped webhook and its own
reconciler processes disturb nothing else. Reconcilers run as real
`placement-webhook reconcile` processes with short lease timings (4 s lease,
3 s renew deadline, 0.5 s retry) to keep the run short.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Nodes, wait_for
from webhook.admission.patch import FILTER_RESULT
from webhook.admission.rules import ENABLED_LABEL
from webhook.conflicts.model import BOUND_BY_ANNOTATION, SELECTED_NODE_ANNOTATION
from webhook.devcluster import DevCluster
from webhook.devcluster.objects import ensure_namespace, pod_manifest
from webhook.devcluster.reconciler import ReconcilerProcess, start_reconciler
from webhook.devcluster.webhook import register_webhook, start_webhook, unregister_webhook
from webhook.kube import Kube
from webhook.reconciler.options import DEFAULT_LEASE_NAME

pytestmark = pytest.mark.e2e

LEASE_NAMESPACE = "placement-webhook"
_names = itertools.count()


# ------------------------------------------------------------------ helpers


def pods_in(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    return list(kube.get(f"/api/v1/namespaces/{namespace}/pods")["items"])


def events_in(kube: Kube, namespace: str, reason: str) -> list[dict[str, Any]]:
    items = kube.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
    return [e for e in items if e.get("reason") == reason]


def lease_holder(kube: Kube, name: str = DEFAULT_LEASE_NAME) -> str:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{name}"
    with contextlib.suppress(Exception):
        return str(kube.get(path)["spec"].get("holderIdentity") or "")
    return ""


def cpu_millis(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def assert_within_capacity(kube: Kube, pods: list[dict[str, Any]]) -> None:
    """Recount from the API: no node has more cpu requested by its pods than it has."""
    alloc = {
        n["metadata"]["name"]: cpu_millis(n["status"]["allocatable"]["cpu"])
        for n in kube.get("/api/v1/nodes")["items"]
    }
    used: Counter[str] = Counter()
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node and not pod["metadata"].get("deletionTimestamp"):
            for c in pod["spec"]["containers"]:
                used[node] += cpu_millis(c["resources"]["requests"]["cpu"])
    over = {n: (u, alloc[n]) for n, u in used.items() if u > alloc[n]}
    assert not over, f"overcommitted nodes (requested, allocatable): {over}"


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with DevCluster.start(tmp_path_factory.mktemp("reconciler-cluster")) as running:
        yield running


@pytest.fixture(scope="module")
def kube(cluster: DevCluster) -> Iterator[Kube]:
    client = Kube(cluster.kubeconfig)
    ensure_namespace(client, LEASE_NAMESPACE)
    yield client
    client.close()


@pytest.fixture(scope="module")
def dead_webhook(cluster: DevCluster, kube: Kube) -> Iterator[None]:
    """A registered webhook (failurePolicy Ignore) whose process has stopped."""
    hook = start_webhook(cluster, name="stopped-webhook")
    register_webhook(kube, hook)
    hook.stop()
    yield
    unregister_webhook(kube)


@pytest.fixture
def namespace(kube: Kube, dead_webhook: None, request: pytest.FixtureRequest) -> str:
    name = f"r{next(_names)}-{request.node.name.replace('_', '-')[5:40].strip('-').lower()}"
    ensure_namespace(kube, name, {ENABLED_LABEL: "true"})
    return name


@pytest.fixture
def nodes(kube: Kube) -> Iterator[Nodes]:
    made = Nodes(kube, None)  # no webhook view to wait for in this module
    yield made
    made.remove_all()


@pytest.fixture
def reconciler(cluster: DevCluster, kube: Kube) -> Iterator[ReconcilerProcess]:
    rec = start_reconciler(cluster, f"solo-{next(_names)}")
    wait_for(rec.leads, timeout=15, message="the reconciler to take the lease")
    yield rec
    rec.stop()


# ------------------------------------------------------------------ tests


def test_pods_left_pending_by_a_stopped_webhook_are_all_bound_once_by_the_reconciler(
    kube: Kube, namespace: str, nodes: Nodes, reconciler: ReconcilerProcess
) -> None:
    for _ in range(3):
        nodes.add(cpu="4", memory="16Gi")
    count = 30
    for i in range(count):
        kube.create(
            f"/api/v1/namespaces/{namespace}/pods",
            pod_manifest(f"p{i}", cpu="300m", scheduler_name="placement-webhook"),
        )

    pods = wait_for(
        lambda: (
            (ps := pods_in(kube, namespace)) and all(p["spec"].get("nodeName") for p in ps) and ps
        ),
        timeout=30,
        message="every pod to be bound",
    )

    assert len(pods) == count
    for pod in pods:
        notes = pod["metadata"]["annotations"]
        assert FILTER_RESULT not in notes  # the webhook never saw it: admission was skipped
        assert notes[SELECTED_NODE_ANNOTATION] == pod["spec"]["nodeName"]
        assert notes[BOUND_BY_ANNOTATION] == f"reconciler/{reconciler.identity}"
    scheduled = wait_for(
        lambda: len(e := events_in(kube, namespace, "Scheduled")) >= count and e,
        message="a Scheduled event per pod",
    )
    per_pod = Counter(e["regarding"]["name"] for e in scheduled)
    assert set(per_pod.values()) == {1}
    assert {e["reportingController"] for e in scheduled} == {"placement-webhook"}
    assert reconciler.metric("placement_webhook_reconciler_binds_total", outcome="bound") == count
    assert_within_capacity(kube, pods)


def test_a_pod_that_fits_nowhere_gets_failed_scheduling_and_is_bound_when_a_node_is_added(
    kube: Kube, namespace: str, nodes: Nodes, reconciler: ReconcilerProcess
) -> None:
    nodes.add(cpu="2")
    nodes.add(cpu="2")
    nodes.add(cpu="64", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    kube.create(
        f"/api/v1/namespaces/{namespace}/pods",
        pod_manifest("big", cpu="8", scheduler_name="placement-webhook"),
    )

    (event,) = wait_for(
        lambda: events_in(kube, namespace, "FailedScheduling"), message="FailedScheduling"
    )
    assert event["type"] == "Warning"
    assert event["regarding"]["name"] == "big"
    assert event["note"] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."
    )
    condition = wait_for(
        lambda: [
            c for c in kube.get(f"/api/v1/namespaces/{namespace}/pods/big")["status"].get(
                "conditions", [])
            if c["type"] == "PodScheduled"
        ],
        message="the PodScheduled condition",
    )  # fmt: skip
    assert (condition[0]["status"], condition[0]["reason"]) == ("False", "Unschedulable")

    added = time.monotonic()
    roomy = nodes.add(cpu="16")
    pod = wait_for(
        lambda: (
            (p := kube.get(f"/api/v1/namespaces/{namespace}/pods/big"))["spec"].get("nodeName")
            and p
        ),
        timeout=30,
        message="the pod to be bound to the new node",
    )
    print(f"\nbound {time.monotonic() - added:.2f}s after the node was added")
    assert pod["spec"]["nodeName"] == roomy
    # Events are written from a background queue: wait for it, then check it is the only one.
    scheduled = wait_for(
        lambda: events_in(kube, namespace, "Scheduled"), message="the Scheduled event"
    )
    assert [e["note"] for e in scheduled] == [f"Successfully assigned {namespace}/big to {roomy}"]


def test_pods_left_unschedulable_are_retried_when_an_assigned_pod_is_deleted(
    kube: Kube, namespace: str, nodes: Nodes, reconciler: ReconcilerProcess
) -> None:
    node = nodes.add(cpu="2")
    kube.create(f"/api/v1/namespaces/{namespace}/pods", pod_manifest("hog", cpu="2", nodeName=node))
    kube.create(
        f"/api/v1/namespaces/{namespace}/pods",
        pod_manifest("waiter", cpu="1", scheduler_name="placement-webhook"),
    )
    wait_for(lambda: events_in(kube, namespace, "FailedScheduling"), message="FailedScheduling")

    kube.delete(f"/api/v1/namespaces/{namespace}/pods/hog", gracePeriodSeconds=0)

    wait_for(
        lambda: kube.get(f"/api/v1/namespaces/{namespace}/pods/waiter")["spec"].get("nodeName"),
        timeout=20,
        message="the waiting pod to be bound once the hog is gone",
    )


def test_killing_the_leader_hands_over_and_no_pod_is_bound_twice(
    cluster: DevCluster, kube: Kube, namespace: str, nodes: Nodes
) -> None:
    for _ in range(2):
        nodes.add(cpu="32", memory="64Gi")
    lease = f"handover-{next(_names)}"
    first = start_reconciler(cluster, "first", lease_name=lease)
    wait_for(first.decides, timeout=15, message="the first reconciler to lead and decide")
    second = start_reconciler(cluster, "second", lease_name=lease)
    try:
        total, created = 80, []
        killed_at: list[float] = []

        def create_pods() -> None:
            for i in range(total):
                kube.create(
                    f"/api/v1/namespaces/{namespace}/pods",
                    pod_manifest(f"p{i}", cpu="100m", scheduler_name="placement-webhook"),
                )
                created.append(time.monotonic())
                time.sleep(0.05)

        creator = threading.Thread(target=create_pods)
        creator.start()
        wait_for(lambda: len(created) >= total // 3, message="a third of the pods")
        first.stop(signal.SIGKILL)
        killed_at.append(time.monotonic())
        wait_for(lambda: lease_holder(kube, lease) == "second", timeout=20, message="handover")
        took_over = time.monotonic() - killed_at[0]
        wait_for(second.leads, timeout=5, message="the second reconciler to lead")
        creator.join()
        pods = wait_for(
            lambda: (
                len(ps := pods_in(kube, namespace)) == total
                and all(p["spec"].get("nodeName") for p in ps)
                and ps
            ),
            timeout=60,
            message="every pod to be bound",
        )

        binders = Counter(p["metadata"]["annotations"][BOUND_BY_ANNOTATION] for p in pods)
        print(
            f"\nhandover {took_over:.2f}s after SIGKILL (lease 4s, retry 0.5s); "
            f"bound by {dict(binders)}"
        )
        assert set(binders) <= {"reconciler/first", "reconciler/second"}
        assert binders["reconciler/second"] > 0
        # No pod was bound twice: each pod carries one binder, and no reconciler
        # announced a bind of a pod the other one bound.
        bound_by = {p["metadata"]["name"]: p["metadata"]["annotations"][BOUND_BY_ANNOTATION]
                    for p in pods}  # fmt: skip
        for event in events_in(kube, namespace, "Scheduled"):
            name = event["regarding"]["name"]
            assert bound_by[name] == f"reconciler/{event['reportingInstance']}", name
        per_pod = Counter(e["regarding"]["name"] for e in events_in(kube, namespace, "Scheduled"))
        assert max(per_pod.values()) == 1
        bound_by_second = second.metric("placement_webhook_reconciler_binds_total", outcome="bound")
        # A bind whose answer came too late for the client is retried and found bound
        # already (by itself): counted once as already-bound, never bound twice.
        retried = second.metric("placement_webhook_reconciler_binds_total", outcome="already-bound")
        assert bound_by_second <= binders["reconciler/second"] <= bound_by_second + retried
        assert_within_capacity(kube, pods)
    finally:
        first.stop(signal.SIGKILL)
        second.stop()


def test_a_leader_stopped_gracefully_releases_the_lease_for_a_fast_handover(
    cluster: DevCluster, kube: Kube
) -> None:
    lease = f"release-{next(_names)}"
    first = start_reconciler(cluster, "polite", lease_name=lease)
    wait_for(first.leads, timeout=15, message="the first reconciler to lead")
    second = start_reconciler(cluster, "heir", lease_name=lease)
    try:
        stopped = time.monotonic()
        first.stop(signal.SIGTERM)
        wait_for(lambda: lease_holder(kube, lease) == "heir", timeout=10, message="handover")
        print(f"\nhandover {time.monotonic() - stopped:.2f}s after SIGTERM (lease 4s)")
        assert "released lease" in first.tail_log()
    finally:
        first.stop(signal.SIGKILL)
        second.stop()
