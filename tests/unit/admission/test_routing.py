"""Which replica decides: /mutate decides, relays the leader's answer, or hands off.

The router and the forwarder are stand-ins here (the e2e tests run real
replicas behind a balancer); the HTTP app, the placer and the view are real.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.unit.admission.test_app import make_view, node, patched, pod, post, review
from webhook.admission.app import create_app
from webhook.admission.forward import CALLER_TIMEOUT_HEADER, FORWARDED_HEADER, Forwarded
from webhook.admission.placement import Placer, PlacerSettings
from webhook.admission.review import parse_timeout
from webhook.policy.marks import HANDED_OFF, SELECTED_NODE
from webhook.policy.policy_file import default_policy


class Forwarder:
    """Answers as the leader would, or not at all; records what it was asked."""

    def __init__(self, answer: bytes | None = None, status: int = 200) -> None:
        self.answer, self.status = answer, status
        self.calls: list[dict[str, Any]] = []

    def forward(self, url: str, body: bytes, *, budget: float, caller_timeout: float) -> Any:
        self.calls.append({"url": url, "budget": budget, "caller_timeout": caller_timeout})
        return None if self.answer is None else Forwarded(self.status, self.answer, 0.001)


def app(route: tuple[str, str], forwarder: Forwarder | None = None) -> Any:
    view = make_view([node("a", cpu="4")])
    placer = Placer(view, default_policy(), PlacerSettings())
    return create_app(placer, router=lambda: route, forwarder=forwarder).test_client(), view


def leader_answer(uid: str) -> bytes:
    patch = [{"op": "add", "path": "/spec/nodeName", "value": "from-leader"}]
    import base64

    return orjson.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": True, "patchType": "JSONPatch",
                     "patch": base64.b64encode(orjson.dumps(patch)).decode()},
    })  # fmt: skip


def test_the_leader_decides_itself() -> None:
    client, view = app(("decide", ""))
    result = patched(pod(), post(client, review(pod())).get_json())
    assert result["spec"]["nodeName"] == "a" and len(view.reservations()) == 1


def test_a_follower_relays_the_leaders_answer_and_reserves_nothing_itself() -> None:
    forwarder = Forwarder(leader_answer("uid-1"))
    client, view = app(("forward", "https://leader:8443"), forwarder)

    result = patched(pod(), post(client, review(pod())).get_json())

    assert result["spec"]["nodeName"] == "from-leader"
    assert view.reservations() == []
    assert forwarder.calls[0]["url"] == "https://leader:8443"


def test_the_follower_gives_the_leader_less_than_the_callers_timeout() -> None:
    forwarder = Forwarder(leader_answer("uid-1"))
    client, _ = app(("forward", "https://leader:8443"), forwarder)
    body = orjson.dumps(review(pod()))
    client.post("/mutate?timeout=2s", data=body, content_type="application/json")
    call = forwarder.calls[0]
    assert 0 < call["budget"] < 2.0 and call["caller_timeout"] == 2.0


@pytest.mark.parametrize(
    ("query", "header", "seconds"),
    [
        ("timeout=2s", None, 2.0),
        ("dryRun=All&timeout=500ms", None, 0.5),
        ("timeout=1s", "3.000", 3.0),
        ("timeout=4s", "3.000", 4.0),
        ("timeout=%31s", None, 1.0),
        ("", "2.500", 2.5),
        ("timeout=" + "9" * 100 + "s", None, 10.0),
        ("timeout=soon", None, 10.0),
    ],
)
def test_the_caller_waits_the_longer_of_the_timeout_parameter_and_the_forwarded_timeout(
    query: str, header: str | None, seconds: float
) -> None:
    forwarder = Forwarder(leader_answer("uid-1"))
    client, _ = app(("forward", "https://leader:8443"), forwarder)
    headers = {CALLER_TIMEOUT_HEADER: header} if header else {}
    for _ in range(2):  # the second time from what was remembered
        client.post(f"/mutate?{query}", data=orjson.dumps(review(pod())),
                    content_type="application/json", headers=headers)  # fmt: skip
    assert [c["caller_timeout"] for c in forwarder.calls] == [seconds, seconds]


@pytest.mark.parametrize(
    "forwarder",
    [
        Forwarder(None),
        Forwarder(b"not json"),
        Forwarder(leader_answer("another-uid")),
        Forwarder(leader_answer("uid-1"), status=503),
    ],
)
def test_no_usable_answer_from_the_leader_hands_the_pod_off(forwarder: Forwarder) -> None:
    client, view = app(("forward", "https://leader:8443"), forwarder)

    result = patched(pod(), post(client, review(pod())).get_json())

    assert "nodeName" not in result["spec"]
    assert result["spec"]["schedulerName"] == "placement-webhook"
    assert "did not answer" in result["metadata"]["annotations"][HANDED_OFF]
    assert view.reservations() == []


def test_a_review_forwarded_to_a_replica_that_does_not_lead_is_not_forwarded_again() -> None:
    forwarder = Forwarder(leader_answer("uid-1"))
    client, _ = app(("forward", "https://elsewhere:8443"), forwarder)
    body = orjson.dumps(review(pod()))

    answer = client.post(
        "/mutate", data=body, content_type="application/json",
        headers={FORWARDED_HEADER: "replica-0", CALLER_TIMEOUT_HEADER: "2.000"},
    ).get_json()  # fmt: skip

    assert forwarder.calls == []
    assert "handed to the fallback binder" in answer["response"]["warnings"][0]


def test_pods_that_are_not_ours_are_answered_by_any_replica_without_forwarding() -> None:
    forwarder = Forwarder(leader_answer("uid-1"))
    client, _ = app(("forward", "https://leader:8443"), forwarder)
    obj = pod()
    obj["metadata"]["labels"] = {"placement-webhook.io/skip": "true"}

    answer = post(client, review(obj)).get_json()

    assert forwarder.calls == [] and "patch" not in answer["response"]


def test_a_hand_off_keeps_a_pod_that_is_not_decidable_now_with_the_fallback_binder() -> None:
    client, view = app(("hand-off", "no replica leads right now"))
    result = patched(pod(), post(client, review(pod())).get_json())
    assert result["spec"]["schedulerName"] == "placement-webhook"
    assert SELECTED_NODE not in result["metadata"]["annotations"]
    assert view.reservations() == []


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2s", 2.0),
        ("1.5s", 1.5),
        ("500ms", 0.5),
        ("1m", 60.0),
        ("1m30s", None),
        ("", None),
        ("2", None),
        ("-1s", None),
        ("s", None),
        ("10h", None),
    ],
)
def test_the_api_servers_timeout_parameter_is_read_as_a_go_duration(
    text: str, seconds: float | None
) -> None:
    assert parse_timeout(text) == seconds
