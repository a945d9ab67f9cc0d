"""Reinvocation: a later webhook changed a pod we placed; the placement is re-checked.

Through the real HTTP app and view (no cluster): the first call places the
pod, then the review comes back with our patch applied and the later
webhook's change on top, as the API server sends it.
"""

from __future__ import annotations

import copy
from typing import Any

from flask.testing import FlaskClient

from tests.unit.admission.test_app import (
    OWNED,
    client_for,
    make_view,
    node,
    patched,
    pod,
    post,
    review,
)
from webhook.admission.patch import RESERVATION, SELECTED_NODE, UNSCHEDULABLE
from webhook.cluster.view import ClusterView


def with_sidecar(obj: dict[str, Any], cpu: str, native: bool = False) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    sidecar = {"name": "proxy", "image": "proxy", "resources": {"requests": {"cpu": cpu}}}
    if native:
        changed["spec"]["initContainers"] = [{**sidecar, "restartPolicy": "Always"}]
    else:
        changed["spec"]["containers"].append(sidecar)
    return changed


def place_first(client: FlaskClient, obj: dict[str, Any]) -> dict[str, Any]:
    return patched(obj, post(client, review(obj)).get_json())


def two_nodes() -> tuple[ClusterView, FlaskClient]:
    view = make_view([node("a", cpu="2"), node("b", cpu="4")])
    return view, client_for(view)


def test_an_unchanged_pod_is_a_no_op_and_keeps_one_reservation() -> None:
    view, client = two_nodes()
    placed = place_first(client, pod(cpu="1"))

    again = post(client, review(placed, uid="u2")).get_json()["response"]

    assert "patch" not in again and "warnings" not in again
    assert [r.key for r in view.reservations()] == [placed["metadata"]["annotations"][RESERVATION]]


def test_a_sidecar_that_still_fits_keeps_the_node_and_the_reservation_counts_it() -> None:
    view, client = two_nodes()
    placed = place_first(client, pod(cpu="1"))
    node_name = placed["spec"]["nodeName"]

    again = post(client, review(with_sidecar(placed, "500m"), uid="u2")).get_json()["response"]

    assert "patch" not in again
    (reservation,) = view.reservations()
    assert reservation.node == node_name and reservation.cpu == 1500


def test_a_sidecar_that_no_longer_fits_moves_the_pod_to_a_node_that_fits() -> None:
    view, client = two_nodes()
    placed = place_first(client, pod(cpu="1500m"))
    placed["spec"]["nodeName"] = "a"  # as if the first choice was the small node
    placed["metadata"]["annotations"][SELECTED_NODE] = "a"

    changed = with_sidecar(placed, "1", native=True)
    answer = post(client, review(changed, uid="u2")).get_json()
    result = patched(changed, answer)

    assert result["spec"]["nodeName"] == "b"
    assert result["metadata"]["annotations"][SELECTED_NODE] == "b"
    assert "moved from a to b" in answer["response"]["auditAnnotations"]["decision"]
    (reservation,) = view.reservations()
    assert (reservation.node, reservation.cpu) == ("b", 2500)


def test_a_pod_that_fits_nowhere_after_the_change_is_unplaced_and_handed_off() -> None:
    view, client = two_nodes()
    placed = place_first(client, pod(cpu="1"))

    changed = with_sidecar(placed, "8")
    result = patched(changed, post(client, review(changed, uid="u2")).get_json())

    assert "nodeName" not in result["spec"]
    notes = result["metadata"]["annotations"]
    assert SELECTED_NODE not in notes and RESERVATION not in notes
    assert "Insufficient cpu" in notes[UNSCHEDULABLE]
    assert result["spec"]["schedulerName"] == "placement-webhook"
    assert view.reservations() == []


def test_node_affinity_mode_re_pins_a_pod_that_no_longer_fits_its_node() -> None:
    view = make_view([node("a", cpu="2"), node("b", cpu="4")])
    client = client_for(view, mode="nodeAffinity")
    obj = pod(cpu="1500m")
    obj["metadata"]["ownerReferences"] = OWNED
    placed = place_first(client, obj)
    first = placed["metadata"]["annotations"][SELECTED_NODE]

    changed = with_sidecar(placed, "2" if first == "b" else "1")
    result = patched(changed, post(client, review(changed, uid="u2")).get_json())

    terms = result["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    now = result["metadata"]["annotations"][SELECTED_NODE]
    pins = [f["values"] for t in terms for f in t.get("matchFields", [])]
    assert pins == [[now]]  # one pin, to the node it fits now
    assert now == "b"  # 1.5 cpu + the sidecar only fit the 4-cpu node
    (reservation,) = view.reservations()
    assert reservation.node == "b"


def test_a_dry_run_reinvocation_leaves_the_reservation_as_it_was() -> None:
    view, client = two_nodes()
    placed = place_first(client, pod(cpu="1"))
    before = view.reservations()

    answer = post(client, review(with_sidecar(placed, "8"), uid="u2", dryRun=True)).get_json()

    assert "patch" in answer["response"]  # the answer says what a real create would get
    assert view.reservations() == before
