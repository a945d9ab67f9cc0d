"""The readiness gate of a live view (`LiveSource.ready`), fed by its own informers.

The informers run here without their threads: each list or watch is one call
against a scripted API, and the view's clock is the test's, so "too long
without a sign of life" is a clock step, not a sleep.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from tests.unit.admission.test_app import OPTED_IN, namespace, node, pod, policy, review
from webhook.admission.app import create_app
from webhook.admission.placement import Placer
from webhook.cluster.source import WATCHED, LiveSource

MAX_AGE = 120.0
BOOKMARK = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "11"}}}


class ScriptedCollections:
    """One page of objects per collection path; each watch call yields one bookmark."""

    def __init__(self, items: dict[str, list[dict[str, Any]]] | None = None):
        self.items = items or {}

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        return {"items": self.items.get(path, []), "metadata": {"resourceVersion": "10"}}

    def watch(self, path: str, *, resource_version: str, timeout_seconds: int = 300,
              **params: Any) -> Iterator[dict[str, Any]]:  # fmt: skip
        yield BOOKMARK


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def source_with(api: ScriptedCollections | None = None) -> tuple[LiveSource, Clock]:
    clock = Clock()
    return LiveSource(api or ScriptedCollections(), max_age_seconds=MAX_AGE, clock=clock), clock


def list_all(source: LiveSource, *, except_kind: str = "") -> None:
    for informer in source.informers:
        if informer.kind != except_kind:
            informer.relist()


def test_a_source_is_not_ready_before_every_collection_was_listed() -> None:
    source, _ = source_with()
    assert not source.ready()

    list_all(source, except_kind="Namespace")

    assert not source.ready()
    list_all(source)
    assert source.ready()


def test_every_watched_collection_counts_for_readiness() -> None:
    for kind, _ in WATCHED:
        source, _ = source_with()
        list_all(source, except_kind=kind)
        assert not source.ready(), f"ready without a list of {kind}"


def test_a_source_is_not_ready_when_a_watch_has_been_silent_too_long() -> None:
    source, clock = source_with()
    list_all(source)

    clock.now += MAX_AGE
    assert source.ready()
    clock.now += 0.001
    assert not source.ready()


def test_a_bookmark_from_every_watch_makes_a_silent_source_ready_again() -> None:
    source, clock = source_with()
    list_all(source)
    clock.now += MAX_AGE + 1
    informers = iter(source.informers)
    first = next(informers)
    first.watch_once()

    assert not source.ready()  # the other watches are still silent
    for informer in informers:
        informer.watch_once()
    assert source.ready()


def test_the_webhook_answers_not_ready_and_admits_unplaced_until_the_source_is_ready() -> None:
    api = ScriptedCollections(
        {"/api/v1/nodes": [node("a")], "/api/v1/namespaces": [namespace("apps", OPTED_IN)]}
    )
    source, _ = source_with(api)
    client = create_app(Placer(source.view, policy(), ready=source.ready)).test_client()

    def mutate() -> dict[str, Any]:
        answer = client.post("/mutate", data=orjson.dumps(review(pod())),
                             content_type="application/json")  # fmt: skip
        return dict(answer.get_json()["response"])

    assert client.get("/readyz").status_code == 503
    assert "patch" not in mutate()

    list_all(source)

    assert client.get("/readyz").status_code == 200
    assert "patch" in mutate()
