"""The informer's list+watch protocol against a scripted API (no cluster)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from webhook.cluster.informer import Backoff, Informer
from webhook.kube import ApiError


def node(name: str, version: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "resourceVersion": version}}


class Recorder:
    """A Store that records what the informer delivers."""

    def __init__(self) -> None:
        self.objects: dict[str, Mapping[str, Any]] = {}
        self.calls: list[str] = []

    def replace(self, kind: str, pages: Any) -> int:
        fresh = {o["metadata"]["name"]: o for page in pages for o in page}
        self.objects = fresh
        self.calls.append(f"replace {len(fresh)}")
        return len(fresh)

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if event == "DELETED":
            self.objects.pop(name, None)
        else:
            self.objects[name] = obj
        self.calls.append(f"{event} {name}")

    def touch(self, kind: str, resource_version: str = "") -> None:
        self.calls.append("touch")


class ScriptedApi:
    """Pages for list calls; one scripted event stream (or error) per watch call."""

    def __init__(self, pages: list[list[dict[str, Any]]], watches: list[Any], version: str = "10"):
        self.pages, self.watches, self.version = pages, watches, version
        self.list_calls: list[dict[str, Any]] = []
        self.watch_versions: list[str] = []

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        self.list_calls.append(params)
        index = int(params.get("continue") or 0)
        meta: dict[str, Any] = {"resourceVersion": self.version}
        if index + 1 < len(self.pages):
            meta["continue"] = str(index + 1)
        return {"items": self.pages[index], "metadata": meta}

    def watch(self, path: str, *, resource_version: str, timeout_seconds: int = 300,
              **params: Any) -> Iterator[dict[str, Any]]:  # fmt: skip
        self.watch_versions.append(resource_version)
        script = self.watches.pop(0)
        if isinstance(script, Exception):
            raise script
        yield from script


def test_paged_list_replaces_the_store_and_remembers_the_version() -> None:
    api = ScriptedApi([[node("a", "1"), node("b", "2")], [node("c", "3")]], [])
    store = Recorder()
    informer = Informer(api, store, "Node", "/api/v1/nodes", page_size=2)

    informer.relist()

    assert sorted(store.objects) == ["a", "b", "c"]
    assert informer.resource_version == "10"
    assert [c.get("continue") for c in api.list_calls] == [None, "1"]
    assert all(c["limit"] == 2 for c in api.list_calls)


def test_watch_applies_events_and_resumes_from_the_newest_version() -> None:
    events = [
        {"type": "ADDED", "object": node("d", "11")},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}},
        {"type": "DELETED", "object": node("a", "16")},
    ]
    api = ScriptedApi([[node("a", "1")]], [events, []])
    store = Recorder()
    informer = Informer(api, store, "Node", "/api/v1/nodes")
    informer.relist()

    informer.watch_once()
    informer.watch_once()

    assert sorted(store.objects) == ["d"]
    assert api.watch_versions == ["10", "16"]
    assert "touch" in store.calls  # bookmarks and closes count as signs of life


def test_expired_watch_relists_instead_of_resuming() -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    api = ScriptedApi([[node("a", "1")]], [[gone]])
    store = Recorder()
    informer = Informer(api, store, "Node", "/api/v1/nodes")
    informer.relist()

    informer.watch_once()

    assert informer.relists == 2
    assert store.calls.count("replace 1") == 2


def test_a_410_answer_to_the_watch_request_leads_to_a_relist() -> None:
    api = ScriptedApi([[node("a", "1")]], [ApiError(410, {"reason": "Expired"}, "GET", "/x"), []])
    store = Recorder()
    informer = Informer(api, store, "Node", "/api/v1/nodes", backoff=Backoff(0.0, 0.0))

    calls = 0
    original = informer.watch_once

    def watch_then_stop() -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            informer.stop()
        original()

    informer.watch_once = watch_then_stop  # type: ignore[method-assign]
    informer.run()

    assert informer.relists == 2


def test_other_watch_errors_back_off_and_retry() -> None:
    api = ScriptedApi([[node("a", "1")]], [ConnectionError("reset"), []])
    store = Recorder()
    delays: list[int] = []

    class CountingBackoff(Backoff):
        def delay(self, attempt: int, rand: Any = None) -> float:
            delays.append(attempt)
            return 0.0

    informer = Informer(api, store, "Node", "/api/v1/nodes", backoff=CountingBackoff())
    original = informer.watch_once

    def watch_then_stop() -> None:
        if len(api.watch_versions) == 1:
            informer.stop()
        original()

    informer.watch_once = watch_then_stop  # type: ignore[method-assign]
    informer.run()

    assert delays == [0]
    assert informer.relists == 1  # a passing error resumes the watch, no re-list


@pytest.mark.parametrize("attempt", [0, 1, 5, 30])
def test_backoff_is_jittered_and_capped(attempt: int) -> None:
    backoff = Backoff(initial=0.5, maximum=30.0)
    assert backoff.delay(attempt, rand=lambda: 1.0) == min(30.0, 0.5 * 2**attempt)
    assert backoff.delay(attempt, rand=lambda: 0.0) == 0.0
