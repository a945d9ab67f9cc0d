"""The fallback binder's attempt and bind paths, against a scripted API (no cluster).

The binder runs as it does in the leader (its scheduling loop, bind pool and
event writer threads); the API answers Bindings as each test scripts it.
Every wait is bounded and waits for a state, never for a duration. The whole
process against the real API server is in tests/e2e/test_reconciler.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from webhook.cluster.view import ClusterView
from webhook.conflicts.store import ConflictStore
from webhook.policy.marks import RESERVATION, SCHEDULER_NAME, SELECTED_NODE, pin
from webhook.policy.policy_file import default_policy
from webhook.reconciler.fallback import FallbackBinder
from webhook.reconciler.queue import BackoffSettings
from webhook.reconciler.settings import ReconcileSettings


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(f"{status} {message}")
        self.status, self.body, self.is_not_found = status, {"message": message}, status == 404


class ScriptedApi:
    """Bindings answered from `bind_errors` (one per POST, then success); pods read back as
    bound where the last accepted Binding put them; events and status patches recorded."""

    def __init__(self, bind_errors: list[ApiError] | None = None):
        self.bind_errors = list(bind_errors or [])
        self.bindings: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.status_patches: list[dict[str, Any]] = []
        self.deletes: list[tuple[str, Any]] = []
        self.pods: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> dict[str, Any]:
        with self.lock:
            if method == "POST" and path.endswith("/binding"):
                self.bindings.append(body)
                if self.bind_errors:
                    raise self.bind_errors.pop(0)
                name = body["metadata"]["name"]
                self.pods[name] = {**self.pods[name], "spec": {
                    **self.pods[name]["spec"], "nodeName": body["target"]["name"]}}  # fmt: skip
                return {"kind": "Status", "status": "Success", "code": 201}
            if method == "DELETE":
                self.deletes.append((path, body))
                return {}
            if method == "PATCH" and path.endswith("/status"):
                self.status_patches.append(body)
                return {}
            if method == "GET":
                return self.pods[path.rsplit("/", 1)[1]]
        raise AssertionError(f"unexpected {method} {path}")

    def create(self, path: str, body: Any, **_: Any) -> dict[str, Any]:
        with self.lock:
            self.events.append(body)
        return dict(body)

    def get(self, path: str, **_: Any) -> dict[str, Any]:
        return {"items": [], "metadata": {"resourceVersion": "1"}}


def node(name: str, cpu: str) -> dict[str, Any]:
    capacity = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def pending(name: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "apps", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Pending"},
    }


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)
    return value


class Leader:
    """may_act for the binder. With `lose_at_bind`, leadership is lost at the moment the
    first bind is about to be sent (after the decision), until `regain()`."""

    def __init__(self) -> None:
        self.lose_at_bind = False
        self.lost = False

    def __call__(self) -> bool:
        if self.lose_at_bind and threading.current_thread().name.startswith("bind"):
            self.lose_at_bind, self.lost = False, True
        return not self.lost

    def regain(self) -> None:
        self.lost = False


@pytest.fixture
def leader() -> Leader:
    return Leader()


@pytest.fixture
def api() -> ScriptedApi:
    return ScriptedApi()


@pytest.fixture
def binder(api: ScriptedApi, leader: Leader) -> Iterator[FallbackBinder]:
    settings = ReconcileSettings(
        identity="test", backoff=BackoffSettings(initial=0.05, maximum=0.1), bind_workers=1
    )
    fallback = FallbackBinder(
        api,  # type: ignore[arg-type]
        default_policy(),
        settings,
        view=ClusterView(synced=True),
        store=ConflictStore(),
        may_act=leader,
        is_leader=lambda: True,
        synced=lambda: True,
    )
    feed = fallback.feed()
    feed.apply("Node", "ADDED", node("small", "1"))
    feed.apply("Node", "ADDED", node("big", "4"))
    yield fallback
    fallback.stop()


def submit(binder: FallbackBinder, api: ScriptedApi, pod: dict[str, Any]) -> None:
    """The watch delivers a pending pod of ours (and the API holds it)."""
    api.pods[pod["metadata"]["name"]] = pod
    binder.feed().apply("Pod", "ADDED", pod)


def test_a_pending_pod_that_fits_is_bound_once_with_its_reservation_and_announced(
    binder: FallbackBinder, api: ScriptedApi
) -> None:
    submit(binder, api, pending("p", cpu="2"))
    binder.start()

    wait_for(lambda: binder.pending() == {k: 0 for k in binder.pending()}, "the queue to empty")
    (binding,) = api.bindings
    assert binding["target"]["name"] == "big"
    (reservation,) = binder.view.reservations()
    assert binding["metadata"]["annotations"][RESERVATION] == reservation.key
    assert binding["metadata"]["uid"] == "uid-p"  # the precondition
    event = wait_for(lambda: [e for e in api.events if e["reason"] == "Scheduled"], "an event")
    assert event[0]["note"] == "Successfully assigned apps/p to big"

    # The watch delivers the bound pod: the reservation has become the pod.
    bound = api.pods["p"]
    annotated = {**bound, "metadata": {**bound["metadata"], "annotations": {
        RESERVATION: reservation.key}}}  # fmt: skip
    binder.feed().apply("Pod", "MODIFIED", annotated)
    assert binder.view.reservations() == []


def test_a_bind_the_api_server_fails_releases_the_node_and_is_retried_after_a_backoff(
    binder: FallbackBinder, api: ScriptedApi
) -> None:
    api.bind_errors = [ApiError(500, "etcdserver: request timed out")]
    submit(binder, api, pending("p", cpu="2"))
    binder.start()

    wait_for(lambda: len(api.bindings) == 2, "a second Binding")
    first, second = api.bindings
    assert first["target"] == second["target"]
    # The failed attempt's reservation was released before the retry reserved again.
    assert (
        first["metadata"]["annotations"][RESERVATION]
        != second["metadata"]["annotations"][RESERVATION]
    )
    wait_for(lambda: len(binder.view.reservations()) == 1, "one reservation (the retry's)")


def test_a_pod_another_scheduler_bound_first_is_done_and_its_reservation_dropped(
    binder: FallbackBinder, api: ScriptedApi
) -> None:
    api.bind_errors = [ApiError(409, 'pod p is already assigned to node "small"')]
    submit(binder, api, pending("p", cpu="1"))
    api.pods["p"]["spec"]["nodeName"] = "small"  # where the other scheduler put it
    binder.start()

    wait_for(lambda: api.bindings, "the Binding")
    wait_for(lambda: binder.view.reservations() == [], "the reservation to be dropped")
    wait_for(lambda: sum(binder.pending().values()) == 0, "the pod to leave the queue")
    assert len(api.bindings) == 1


def test_a_bind_after_leadership_was_lost_is_not_sent_and_the_pod_waits_for_the_next_leader(
    binder: FallbackBinder, api: ScriptedApi, leader: Leader
) -> None:
    leader.lose_at_bind = True
    submit(binder, api, pending("p", cpu="1"))
    binder.start()

    wait_for(
        lambda: leader.lost and binder.pending()["active"] == 1,
        "the decided pod to be given back to the queue",
    )
    assert api.bindings == []
    assert binder.view.reservations() == []

    leader.regain()
    wait_for(lambda: api.bindings, "the Binding once this process may act again")
    assert api.bindings[0]["target"]["name"] == "big"


def test_a_pod_that_fits_no_node_gets_failed_scheduling_and_the_pod_condition(
    binder: FallbackBinder, api: ScriptedApi
) -> None:
    submit(binder, api, pending("huge", cpu="64"))
    binder.start()

    events = wait_for(
        lambda: [e for e in api.events if e["reason"] == "FailedScheduling"], "FailedScheduling"
    )
    assert events[0]["note"] == "0/2 nodes are available: 2 Insufficient cpu."
    patch = wait_for(lambda: api.status_patches, "the PodScheduled condition")[0]
    (condition,) = patch["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert condition["message"] == events[0]["note"]
    assert api.bindings == []
    assert binder.view.reservations() == []
    assert binder.pending()["unschedulable"] == 1, binder.pending()


# ---- nodeAffinity mode: a pinned pod whose node stopped fitting -------------------


def pinned(
    name: str, node: str, cpu: str, *, kube_scheduler_gave_up: bool = True
) -> dict[str, Any]:
    """A ReplicaSet pod our nodeAffinity mode pinned to `node`, left to kube-scheduler."""
    conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    return {
        "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "apps", "uid": f"uid-{name}", "resourceVersion": "7",
            "annotations": {SELECTED_NODE: node, RESERVATION: f"r-{name}"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                 "uid": "rs-uid", "controller": True}],
        },
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [pin(node)]}]}}},
        },
        "status": {"phase": "Pending", "conditions": conditions if kube_scheduler_gave_up else []},
    }  # fmt: skip


def running(name: str, node: str, cpu: str) -> dict[str, Any]:
    pod = pending(name, cpu)
    pod["spec"] = {**pod["spec"], "schedulerName": "default-scheduler", "nodeName": node}
    pod["status"] = {"phase": "Running"}
    return pod


def test_a_pinned_pod_whose_node_was_filled_is_deleted_for_its_controller_to_recreate(
    binder: FallbackBinder, api: ScriptedApi
) -> None:
    binder.feed().apply("Pod", "ADDED", running("other", "small", cpu="1"))  # filled by another
    binder.feed().apply("Pod", "ADDED", pinned("p", "small", cpu="1"))

    assert binder.repair_pass() == 1

    ((path, options),) = api.deletes
    assert path == "/api/v1/namespaces/apps/pods/p"
    assert options["preconditions"] == {"uid": "uid-p", "resourceVersion": "7"}
    event = wait_for(lambda: [e for e in api.events if e["reason"] != "Scheduled"], "an event")
    assert "pinned to small, which no longer fits it, while big does" in event[0]["note"]
    assert binder.repair_pass() == 0  # once per pod, not on every pass


@pytest.mark.parametrize(
    ("why", "pod", "others"),
    [
        ("its node still fits", pinned("p", "big", cpu="1"), []),
        ("kube-scheduler has not given up", pinned("p", "small", cpu="1",
                                                   kube_scheduler_gave_up=False),
         [running("other", "small", cpu="1")]),
        ("no other node fits either", pinned("p", "small", cpu="4"),
         [running("other", "big", cpu="1")]),
    ],
)  # fmt: skip
def test_a_pinned_pod_is_left_alone_when(
    binder: FallbackBinder,
    api: ScriptedApi,
    why: str,
    pod: dict[str, Any],
    others: list[dict[str, Any]],
) -> None:
    for other in others:
        binder.feed().apply("Pod", "ADDED", other)
    binder.feed().apply("Pod", "ADDED", pod)

    assert binder.repair_pass() == 0, why
    assert api.deletes == []
