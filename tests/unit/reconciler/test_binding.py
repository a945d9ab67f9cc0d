"""Binding through pods/binding, verified by reading the pod back."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.bodies import ObjectRef, binding
from webhook.policy.marks import BOUND_BY, RESERVATION, SELECTED_NODE
from webhook.reconciler.binding import (
    ALREADY_BOUND,
    BOUND,
    ERROR,
    GONE,
    Binder,
    classify_failure,
)


class ApiError(Exception):
    def __init__(self, status: int, message: str = ""):
        super().__init__(f"{status} {message}")
        self.status = status
        self.body = {"message": message}
        self.is_not_found = status == 404


class PodApi:
    """Answers a Binding POST with `bind_error` (or success) and GETs with `stored`."""

    def __init__(self, stored: dict[str, Any] | None, bind_error: ApiError | None = None):
        self.stored, self.bind_error = stored, bind_error
        self.bindings: list[dict[str, Any]] = []

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> dict[str, Any]:
        if method == "POST":
            assert path.endswith("/binding")
            self.bindings.append(body)
            if self.bind_error is not None:
                raise self.bind_error
            return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}
        if self.stored is None:
            raise ApiError(404)
        return self.stored


POD = ObjectRef("ns", "p", "u1")


def stored(node: str | None, uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": "p", "uid": uid}, "spec": {"nodeName": node}}


def test_the_binding_names_the_node_and_carries_the_uid_precondition() -> None:
    body = binding(POD, "n1", {"a": "b"})
    assert body["kind"] == "Binding" and body["apiVersion"] == "v1"
    assert body["metadata"] == {
        "name": "p",
        "namespace": "ns",
        "uid": "u1",
        "annotations": {"a": "b"},
    }
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}


def test_a_bind_that_reads_back_on_the_node_is_bound() -> None:
    api = PodApi(stored("n1"))
    result = Binder(api, "r1").bind(POD, "n1", "res-1")
    assert (result.outcome, result.node) == (BOUND, "n1")
    notes = api.bindings[0]["metadata"]["annotations"]
    assert notes == {
        SELECTED_NODE: "n1",
        BOUND_BY: "reconciler/r1",
        RESERVATION: "res-1",
    }


def test_already_assigned_is_a_normal_outcome_naming_where_the_pod_went() -> None:
    api = PodApi(stored("n2"), ApiError(409, 'pod p is already assigned to node "n2"'))
    result = Binder(api, "r1").bind(POD, "n1", None)
    assert (result.outcome, result.node) == (ALREADY_BOUND, "n2")


def test_a_pod_replaced_under_the_same_name_is_gone() -> None:
    api = PodApi(stored(None, uid="u2"), ApiError(409, "Precondition failed: UID in precondition"))
    assert Binder(api, "r1").bind(POD, "n1", None).outcome == GONE


def test_a_bind_accepted_but_read_back_elsewhere_is_reported_as_bound_elsewhere() -> None:
    result = Binder(PodApi(stored("n2")), "r1").bind(POD, "n1", None)
    assert (result.outcome, result.node) == (ALREADY_BOUND, "n2")


def test_a_server_error_is_an_error_to_back_off_from() -> None:
    api = PodApi(stored(None), ApiError(500, "etcd timeout"))
    assert Binder(api, "r1").bind(POD, "n1", None).outcome == ERROR


CANNOT = "Operation cannot be fulfilled on"
STORAGE = "StorageError: invalid object, Code: 4, AdditionalErrorMsg:"


@pytest.mark.parametrize(
    ("status", "message", "outcome"),
    [
        (409, f'{CANNOT} pods/binding "p": pod p is already assigned to node "n1"', ALREADY_BOUND),
        (409, f"{CANNOT} pods \"p\": {STORAGE} Precondition failed: UID in precondition: x", GONE),
        (409, "pod p is being deleted, cannot be assigned to a host", GONE),
        (404, 'pods "p" not found', GONE),
        (403, "forbidden", ERROR),
        (None, "connection reset", ERROR),
    ],
)  # fmt: skip
def test_failures_are_classified_by_status_and_message(
    status: int | None, message: str, outcome: str
) -> None:
    assert classify_failure(status, message) == outcome


def test_the_extender_binding_without_uid_or_reservation_names_only_the_pod_and_node() -> None:
    """kube-scheduler may send an extender bind without the pod's uid: no precondition then."""
    body = binding(ObjectRef("ns", "p"), "n1")
    assert body["metadata"] == {"name": "p", "namespace": "ns"}
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}
