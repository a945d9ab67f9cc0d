"""The admission app end to end in-process: review in, JSONPatch out (no cluster).

The view is built from in-memory objects, as `serve --snapshot` does; the
HTTP path, parsing, placement, patching and metrics are the real ones.
"""

from __future__ import annotations

import base64
import copy
import threading
from collections.abc import Iterator
from typing import Any

import jsonpatch
import orjson
import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.admission.app import create_app
from webhook.admission.patch import (
    FILTER_RESULT,
    FINALSCORE_RESULT,
    RESERVATION,
    SELECTED_NODE,
    UNSCHEDULABLE,
)
from webhook.admission.placement import Placer, PlacerSettings
from webhook.cluster.view import ClusterView
from webhook.policy.dump import build_snapshot
from webhook.policy.placement_policy import Mode, PlacementSettings
from webhook.policy.policy_file import Policy, default_policy

OPTED_IN = {"placement-webhook.io/enabled": "true"}


def node(name: str, cpu: str = "4", memory: str = "8Gi", **labels: str) -> dict[str, Any]:
    capacity = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "spec": {},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def pod(name: str = "p", cpu: str = "1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}],
            **spec,
        },
    }


def review(obj: dict[str, Any] | None, uid: str = "uid-1", **request: Any) -> dict[str, Any]:
    body = {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "apps",
        "operation": "CREATE",
        "object": obj,
        "dryRun": False,
        **request,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}


def namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def make_view(nodes: list[dict[str, Any]], max_unconfirmed_share: float = 0.5) -> ClusterView:
    snapshot = build_snapshot(nodes, [], [namespace("apps", OPTED_IN)])
    view = ClusterView(snapshot, synced=True, max_unconfirmed_share=max_unconfirmed_share)
    view.replace("Namespace", [[namespace("apps", OPTED_IN)]])
    return view


def policy(mode: str = "nodeName") -> Policy:
    base = default_policy()
    return Policy(profiles=base.profiles, placement=PlacementSettings(mode=Mode(mode)))


@pytest.fixture
def view() -> ClusterView:
    return make_view([node("small", cpu="1"), node("big", cpu="8")])


def client_for(view: ClusterView, mode: str = "nodeName") -> FlaskClient:
    return create_app(Placer(view, policy(mode), PlacerSettings())).test_client()


@pytest.fixture
def client(view: ClusterView) -> Iterator[FlaskClient]:
    yield client_for(view)


def post(client: FlaskClient, body: Any, content_type: str = "application/json") -> Any:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    return client.post("/mutate", data=data, content_type=content_type)


def patched(obj: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    response = answer["response"]
    if "patch" not in response:
        return obj
    ops = orjson.loads(base64.b64decode(response["patch"]))
    return jsonpatch.apply_patch(copy.deepcopy(obj), ops)


def test_pod_is_placed_on_the_node_that_fits(client: FlaskClient) -> None:
    obj = pod(cpu="2")
    answer = post(client, review(obj)).get_json()

    assert answer["response"]["uid"] == "uid-1"
    assert answer["response"]["allowed"] is True
    assert answer["response"]["patchType"] == "JSONPatch"
    result = patched(obj, answer)
    assert result["spec"]["nodeName"] == "big"
    notes = result["metadata"]["annotations"]
    assert notes[SELECTED_NODE] == "big"
    assert orjson.loads(notes[FILTER_RESULT])["rejected"] == {"Insufficient cpu": 1}
    assert RESERVATION in notes


def test_placement_reserves_the_slot_for_the_next_pod(client: FlaskClient) -> None:
    first = patched(pod("a", cpu="8"), post(client, review(pod("a", cpu="8"))).get_json())
    second = patched(
        pod("b", cpu="8"), post(client, review(pod("b", cpu="8"), uid="u2")).get_json()
    )
    assert first["spec"]["nodeName"] == "big"
    assert "nodeName" not in second["spec"]
    assert "Insufficient cpu" in second["metadata"]["annotations"][UNSCHEDULABLE]


def test_dry_run_gets_the_same_answer_without_a_reservation(
    client: FlaskClient, view: ClusterView
) -> None:
    obj = pod(cpu="8")
    dry = patched(obj, post(client, review(obj, dryRun=True)).get_json())
    assert dry["spec"]["nodeName"] == "big"
    assert RESERVATION not in dry["metadata"]["annotations"]
    assert view.reservations() == []
    real = patched(obj, post(client, review(obj, uid="u2")).get_json())
    assert real["spec"]["nodeName"] == "big"


def test_pod_that_fits_nowhere_is_handed_to_the_reconciler_with_the_reason(
    client: FlaskClient,
) -> None:
    obj = pod(cpu="64")
    result = patched(obj, post(client, review(obj)).get_json())
    assert "nodeName" not in result["spec"]
    assert result["spec"]["schedulerName"] == "placement-webhook"
    reason = result["metadata"]["annotations"][UNSCHEDULABLE]
    assert reason == "0/2 nodes are available: 2 Insufficient cpu."


def test_reinvocation_on_an_already_placed_pod_is_a_no_op(client: FlaskClient) -> None:
    obj = pod()
    once = patched(obj, post(client, review(obj)).get_json())
    again = post(client, review(once, uid="u2")).get_json()
    assert "patch" not in again["response"]


OWNED = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "controller": True,
          "uid": "7c1f0d2e-55a3-4f44-9b1e-1d2c3b4a5f60"}]  # fmt: skip


def test_node_affinity_mode_pins_a_replicaset_pod_and_keeps_existing_terms(
    view: ClusterView,
) -> None:
    client = client_for(view, mode="nodeAffinity")
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "Exists"}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}  # fmt: skip
    obj = pod(cpu="2", affinity=affinity)
    obj["metadata"]["ownerReferences"] = OWNED

    result = patched(obj, post(client, review(obj)).get_json())

    assert "nodeName" not in result["spec"]
    terms = result["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {
            **term,
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["big"]}],
        }
    ]
    again = post(client, review(result, uid="u2")).get_json()
    assert "patch" not in again["response"]  # reinvocation with nothing changed is a no-op
    assert len(view.reservations()) == 1


def test_node_affinity_mode_only_prefers_the_node_for_a_pod_no_controller_recreates(
    view: ClusterView,
) -> None:
    client = client_for(view, mode="nodeAffinity")
    obj = pod(cpu="2")

    result = patched(obj, post(client, review(obj)).get_json())

    node_affinity = result["spec"]["affinity"]["nodeAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in node_affinity
    pin = {"key": "metadata.name", "operator": "In", "values": ["big"]}
    preferred = node_affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred == [{"weight": 100, "preference": {"matchFields": [pin]}}]


def test_node_affinity_mode_pins_nothing_and_reserves_nothing_when_no_node_fits(
    view: ClusterView,
) -> None:
    client = client_for(view, mode="nodeAffinity")
    obj = pod(cpu="64")
    obj["metadata"]["ownerReferences"] = OWNED

    result = patched(obj, post(client, review(obj)).get_json())

    assert "affinity" not in result["spec"] and "nodeName" not in result["spec"]
    assert result["metadata"]["annotations"][UNSCHEDULABLE] == (
        "0/2 nodes are available: 2 Insufficient cpu."
    )
    assert SELECTED_NODE not in result["metadata"]["annotations"]
    assert view.reservations() == []


def test_pod_in_a_namespace_without_the_label_is_left_alone(view: ClusterView) -> None:
    view.apply("Namespace", "ADDED", namespace("other", {}))
    obj = pod()
    answer = post(client_for(view), review(obj, namespace="other")).get_json()
    assert "patch" not in answer["response"]
    assert "not labelled" in answer["response"]["warnings"][0]


def test_pod_the_core_cannot_evaluate_is_left_to_the_default_scheduler(
    client: FlaskClient,
) -> None:
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    obj = pod(volumes=[volume])
    result = patched(obj, post(client, review(obj)).get_json())
    assert "nodeName" not in result["spec"]
    assert result["spec"]["schedulerName"] == "default-scheduler"
    assert "placement-webhook.io/skipped" in result["metadata"]["annotations"]


def test_annotations_stay_small_on_a_large_cluster() -> None:
    view = make_view([node(f"n{i:04}", cpu="2") for i in range(2000)])
    obj = pod()
    result = patched(obj, post(client_for(view), review(obj)).get_json())
    notes = result["metadata"]["annotations"]
    assert sum(len(k) + len(v) for k, v in notes.items()) < 4096
    assert len(orjson.loads(notes[FINALSCORE_RESULT])) == 5


def test_concurrent_admissions_never_share_the_last_slot() -> None:
    view = make_view([node(f"n{i}", cpu="1") for i in range(10)], max_unconfirmed_share=1.0)
    client = client_for(view)
    placed: list[str | None] = []

    def admit(i: int) -> None:
        obj = pod(f"p{i}", cpu="1")
        result = patched(obj, post(client, review(obj, uid=f"u{i}")).get_json())
        placed.append(result["spec"].get("nodeName"))

    threads = [threading.Thread(target=admit, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    nodes = [n for n in placed if n]
    assert sorted(nodes) == sorted(f"n{i}" for i in range(10))


@pytest.mark.parametrize(
    ("data", "content_type", "status"),
    [
        (b"", "application/json", 400),
        (b"{", "application/json", 400),
        (b"{}", "text/plain", 415),
        (orjson.dumps({"apiVersion": "v1", "kind": "Pod"}), "application/json", 400),
    ],
)
def test_bad_requests_get_a_json_error(
    client: FlaskClient, data: bytes, content_type: str, status: int
) -> None:
    answer = client.post("/mutate", data=data, content_type=content_type)
    assert answer.status_code == status
    assert answer.is_json
    assert answer.get_json()["error"]


def test_oversized_body_is_refused_with_413_json(client: FlaskClient) -> None:
    answer = client.post("/mutate", data=b"x" * (4 * 1024 * 1024), content_type="application/json")
    assert answer.status_code == 413
    assert answer.get_json()["status"] == 413


def test_error_for_a_readable_uid_names_it(client: FlaskClient) -> None:
    body = review(pod())
    body["request"]["dryRun"] = "sometimes"
    answer = post(client, body)
    assert answer.status_code == 400
    assert answer.get_json()["uid"] == "uid-1"


def test_non_pod_and_non_create_requests_are_allowed_untouched(client: FlaskClient) -> None:
    update = post(client, review(pod(), operation="UPDATE")).get_json()["response"]
    binding = post(client, review(pod(), subResource="binding")).get_json()["response"]
    for response in (update, binding):
        assert response["allowed"] is True
        assert "patch" not in response


def test_unknown_paths_and_methods_answer_json(client: FlaskClient) -> None:
    assert client.get("/nope").get_json()["status"] == 404
    assert client.get("/mutate").get_json()["status"] == 405


def test_health_readiness_and_metrics(client: FlaskClient) -> None:
    post(client, review(pod()))
    assert client.get("/healthz").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.get_json()["nodes"] == 2
    assert client.get("/metrics").status_code == 404  # only on the authorized metrics endpoint
    page = client.application.extensions["placement-webhook.pages"]["/metrics"]
    text = page()[2].decode()
    assert 'placement_webhook_decisions_total{reason="placed",result="placed"} 1.0' in text
    assert "placement_webhook_reservations 1.0" in text
    assert 'placement_webhook_decision_seconds_bucket{le="0.001",result="placed"}' in text


def test_metrics_count_every_admission_and_every_bad_request(client: FlaskClient) -> None:
    for i in range(3):
        post(client, review(pod(f"p{i}", cpu="100m"), uid=f"uid-{i}"))
    post(client, b"{")
    post(client, b"[]")
    post(client, review(pod()), content_type="text/plain")
    text = client.application.extensions["placement-webhook.pages"]["/metrics"]()[2].decode()
    assert 'placement_webhook_decisions_total{reason="placed",result="placed"} 3.0' in text
    assert 'placement_webhook_decision_seconds_count{result="placed"} 3.0' in text
    assert 'placement_webhook_routes_total{route="decide"} 3.0' in text
    assert 'placement_webhook_bad_requests_total{status="400"} 2.0' in text
    assert 'placement_webhook_bad_requests_total{status="415"} 1.0' in text


def test_readyz_fails_while_the_view_is_not_synced() -> None:
    """With the real gate on a view nothing was listed into (the live source's
    gate is tested with its informers in tests/unit/cluster/test_source.py)."""
    view = ClusterView()
    client = create_app(Placer(view, policy(), ready=lambda: view.is_ready(120.0))).test_client()
    assert client.get("/readyz").status_code == 503


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    obj=st.recursive(
        st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=6),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(
            st.sampled_from(["metadata", "spec", "containers", "resources", "requests", "cpu",
                             "name", "labels", "nodeName", "tolerations", "affinity", "x"]),
            c, max_size=4),
        max_leaves=25,
    )
)  # fmt: skip
def test_generated_pod_objects_never_cause_a_server_error(client: FlaskClient, obj: Any) -> None:
    answer = post(client, review(obj if isinstance(obj, dict) else {"spec": obj}))
    assert answer.status_code in (200, 400)
    if answer.status_code == 200:
        assert answer.get_json()["response"]["uid"] == "uid-1"


def test_without_authenticated_callers_a_namespace_the_view_does_not_know_is_not_placed(
    view: ClusterView,
) -> None:
    answer = post(client_for(view), review(pod(), namespace="forged")).get_json()["response"]
    assert "patch" not in answer
    assert "not in the cluster view" in answer["warnings"][0]


def test_with_authenticated_callers_the_api_servers_namespace_selector_is_the_authority(
    view: ClusterView,
) -> None:
    view.apply("Namespace", "ADDED", namespace("lagging", {}))  # the label not seen yet
    settings = PlacerSettings(namespace_selector_is_authority=True)
    client = create_app(Placer(view, policy(), settings)).test_client()
    for name in ("unknown-yet", "lagging"):
        obj = pod()
        result = patched(obj, post(client, review(obj, namespace=name, uid=name)).get_json())
        assert result["spec"]["nodeName"] in ("small", "big")
    excluded = post(client, review(pod(), namespace="kube-system")).get_json()["response"]
    assert "patch" not in excluded  # the excluded namespaces stay excluded
