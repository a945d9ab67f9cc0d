"""The extender's HTTP verbs, driven the way kube-scheduler drives them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import pytest
from flask.testing import FlaskClient
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.extender.builders import args_body, node, pod, snapshot
from webhook.cluster.view import ClusterView
from webhook.extender.app import create_app
from webhook.extender.service import Extender
from webhook.policy.policy_file import load_policy

POLICY = load_policy(
    "apiVersion: kubescheduler.config.k8s.io/v1\n"
    "kind: KubeSchedulerConfiguration\n"
    "percentageOfNodesToScore: 100\n"
)


VERBS = ["filter", "prioritize", "bind"]


class ApiError(Exception):
    def __init__(self, status: int):
        super().__init__(f"HTTP {status}")
        self.status = status


class Binder:
    """Records binding writes; fails them with `status` when set."""

    def __init__(self, status: int | None = None):
        self.calls: list[tuple[str, Mapping[str, Any]]] = []
        self.status = status

    def create(self, path: str, body: Mapping[str, Any], **params: Any) -> dict[str, Any]:
        self.calls.append((path, body))
        if self.status is not None:
            raise ApiError(self.status)
        return {"kind": "Status", "status": "Success"}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]] = (),  # type: ignore[assignment]
    *,
    binder: Binder | None = None,
    ready: bool = True,
    clock: Clock | None = None,
) -> FlaskClient:
    clock = clock or Clock()
    view = ClusterView(snapshot(nodes, pods), synced=True, clock=clock)
    extender = Extender(
        view, POLICY, binder=binder, ready=lambda: ready, clock=clock, bind_timeout=30
    )
    return create_app(extender).test_client()


def post(client: FlaskClient, verb: str, body: bytes) -> Any:
    answer = client.post(f"/{verb}", data=body, content_type="application/json")
    return answer.status_code, orjson.loads(answer.data)


def binding(name: str, node_name: str, uid: str | None = None) -> bytes:
    return orjson.dumps(
        {"PodName": name, "PodNamespace": "ns", "PodUID": uid or f"uid-{name}", "Node": node_name}
    )


@pytest.mark.parametrize("cache_capable", [True, False])
@pytest.mark.parametrize("lower_case", [True, False])
def test_filter_answers_in_the_form_the_scheduler_asked_in(
    cache_capable: bool, lower_case: bool
) -> None:
    nodes = [node("small", cpu="1"), node("big", cpu="8")]
    client = make(nodes)

    status, result = post(
        client,
        "filter",
        args_body(pod("p", cpu="2"), nodes, cache_capable=cache_capable, lower_case=lower_case),
    )

    assert status == 200
    assert result["FailedAndUnresolvableNodes"] == {"small": "Insufficient cpu"}
    if cache_capable:
        assert result["NodeNames"] == ["big"]
        assert result["Nodes"] is None
    else:
        assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["big"]
        assert result["NodeNames"] is None


def test_filter_before_the_cache_is_synced_is_an_in_band_error() -> None:
    nodes = [node("a")]
    client = make(nodes, ready=False)

    status, result = post(client, "filter", args_body(pod("p"), nodes))

    assert status == 200
    assert "not synced" in result["Error"]


def test_a_malformed_body_is_a_400_with_the_reason() -> None:
    client = make([node("a")])

    status, result = post(client, "filter", b"{")

    assert status == 400
    assert "not valid JSON" in result["Error"]


def test_a_pod_the_policy_cannot_evaluate_passes_every_node() -> None:
    nodes = [node("a"), node("b")]
    gated = pod("p", schedulingGates=[{"name": "wait"}])
    client = make(nodes)

    _, result = post(client, "filter", args_body(gated, nodes))
    _, scores = post(client, "prioritize", args_body(gated, nodes))

    assert result["NodeNames"] == ["a", "b"]
    assert scores == [{"Host": "a", "Score": 0}, {"Host": "b", "Score": 0}]


@pytest.mark.parametrize("broken", [{"metadata": [1]}, {"spec": {"containers": "x"}}])
def test_a_pod_the_policy_cannot_read_gets_no_opinion_not_an_error(broken: dict[str, Any]) -> None:
    nodes = [node("a")]
    client = make(nodes)
    body = orjson.dumps({"Pod": broken, "NodeNames": ["a"]})

    status, result = post(client, "filter", body)

    assert (status, result["NodeNames"]) == (200, ["a"])


def test_prioritize_gives_the_policy_choice_the_maximum_priority() -> None:
    nodes = [node("busy"), node("idle")]
    client = make(nodes, [pod("x", cpu="3", node_name="busy")])

    status, scores = post(client, "prioritize", args_body(pod("p"), nodes, cache_capable=False))

    assert status == 200
    assert {s["Host"]: s["Score"] for s in scores}["idle"] == 10
    assert {s["Host"]: s["Score"] for s in scores}["busy"] < 10


def test_bind_writes_a_binding_with_the_pod_uid_as_precondition() -> None:
    binder = Binder()
    client = make([node("a")], binder=binder)

    status, result = post(client, "bind", binding("p", "a", uid="u-9"))

    assert (status, result) == (200, {})
    path, body = binder.calls[0]
    assert path == "/api/v1/namespaces/ns/pods/p/binding"
    assert body["metadata"] == {"name": "p", "namespace": "ns", "uid": "u-9"}
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "a"}


def test_a_bound_pod_counts_on_its_node_before_the_watch_delivers_it() -> None:
    nodes = [node("a", cpu="2")]
    client = make(nodes, binder=Binder())
    first = pod("first", cpu="1500m")
    post(client, "filter", args_body(first, nodes))

    post(client, "bind", binding("first", "a"))
    _, result = post(client, "filter", args_body(pod("second", cpu="1"), nodes))

    assert result["FailedNodes"] == {"a": "Insufficient cpu"}


def test_a_failed_binding_is_reported_and_frees_the_node_again() -> None:
    nodes = [node("a", cpu="2")]
    client = make(nodes, binder=Binder(status=409))
    first = pod("first", cpu="1500m")
    post(client, "filter", args_body(first, nodes))

    status, result = post(client, "bind", binding("first", "a"))
    _, after = post(client, "filter", args_body(pod("second", cpu="1"), nodes))

    assert status == 200
    assert result["Error"].startswith("binding failed")
    assert after["NodeNames"] == ["a"]


def test_an_assumed_pod_the_watch_never_delivers_is_forgotten_after_the_bind_timeout() -> None:
    nodes = [node("a", cpu="2")]
    clock = Clock()
    client = make(nodes, binder=Binder(), clock=clock)
    post(client, "filter", args_body(pod("first", cpu="1500m"), nodes))
    post(client, "bind", binding("first", "a"))

    clock.now += 30 + POLICY.placement.reservation_grace_seconds + 0.1
    _, result = post(client, "filter", args_body(pod("second", cpu="1"), nodes))

    assert result["NodeNames"] == ["a"]


def test_the_binding_carries_the_reservation_that_the_bound_pod_then_ends() -> None:
    nodes = [node("a", cpu="2")]
    binder = Binder()
    clock = Clock()
    view = ClusterView(snapshot(nodes, []), synced=True, clock=clock)
    client = create_app(Extender(view, POLICY, binder=binder, clock=clock)).test_client()
    first = pod("first", cpu="1500m")
    post(client, "filter", args_body(first, nodes))
    post(client, "bind", binding("first", "a"))
    key = binder.calls[0][1]["metadata"]["annotations"]["placement-webhook.io/reservation"]
    assert [r.key for r in view.reservations()] == [key]

    bound = {**first, "spec": {**first["spec"], "nodeName": "a"}}
    bound["metadata"] = {**first["metadata"], "annotations": {
        "placement-webhook.io/reservation": key}}  # fmt: skip
    view.apply("Pod", "MODIFIED", bound)

    assert view.reservations() == []
    _, result = post(client, "filter", args_body(pod("second", cpu="1"), nodes))
    assert result["FailedNodes"] == {"a": "Insufficient cpu"}


def test_bind_without_a_binder_is_refused_in_band() -> None:
    client = make([node("a")], binder=None)

    _, result = post(client, "bind", binding("p", "a"))

    assert "not enabled" in result["Error"]


def test_metrics_count_calls_by_verb_and_result() -> None:
    nodes = [node("a")]
    client = make(nodes, binder=Binder())
    post(client, "filter", args_body(pod("p"), nodes))
    post(client, "prioritize", args_body(pod("p"), nodes))
    post(client, "bind", binding("p", "a"))

    text = client.get("/metrics").data.decode()

    assert 'placement_extender_requests_total{result="passed",verb="filter"} 1.0' in text
    assert 'placement_extender_requests_total{result="scored",verb="prioritize"} 1.0' in text
    assert 'placement_extender_binds_total{result="bound"} 1.0' in text
    assert 'placement_extender_request_nodes_count{verb="filter"} 1.0' in text


def test_readyz_reports_the_cache() -> None:
    client = make([node("a"), node("b")])

    answer = client.get("/readyz")

    assert answer.status_code == 200
    assert orjson.loads(answer.data)["nodes"] == 2


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=10,
)
KEYS = st.sampled_from(["Pod", "pod", "Nodes", "NodeNames", "nodenames", "PodName", "Node", "x"])


@settings(max_examples=60, deadline=None)
@given(body=st.dictionaries(KEYS, JSON_VALUES, max_size=4), verb=st.sampled_from(VERBS))
def test_no_body_makes_a_verb_fail_other_than_with_a_400(body: dict[str, Any], verb: str) -> None:
    client = make([node("a")], binder=Binder())

    answer = client.post(f"/{verb}", data=orjson.dumps(body), content_type="application/json")

    assert answer.status_code in (200, 400)
    assert isinstance(orjson.loads(answer.data), dict | list)
