"""The reporting shell: one event per pod that newly lost, metrics by kind, evictions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from tests.unit.conflicts.builders import node, pod
from webhook.conflicts.report import ConflictMetrics, ConflictReporter
from webhook.conflicts.store import ConflictStore
from webhook.events import EventSpec


class Recorder:
    def __init__(self) -> None:
        self.events: list[EventSpec] = []

    def record(self, spec: EventSpec) -> bool:
        self.events.append(spec)
        return True


class EvictionApi:
    """Answers eviction POSTs with the given status (201 when absent)."""

    def __init__(self, statuses: Mapping[str, int] | None = None) -> None:
        self.statuses = dict(statuses or {})
        self.posted: list[str] = []

    def create(self, path: str, body: Mapping[str, Any], **params: Any) -> dict[str, Any]:
        name = body["metadata"]["name"]
        self.posted.append(name)
        status = self.statuses.get(name, 201)
        if status >= 300:
            err = RuntimeError(f"HTTP {status}")
            err.status = status  # type: ignore[attr-defined]
            raise err
        return {"kind": "Status", "status": "Success"}


def at(second: int) -> str:
    return f"2024-05-01T10:00:{second:02d}Z"


def overcommitted_store() -> ConflictStore:
    store = ConflictStore()
    store.put_node(node("n1", cpu="1"))
    store.put_pod(pod("a", "n1", at=at(1)))
    store.put_pod(pod("b", "n1", at=at(2)))
    return store


def reporter(store: ConflictStore, **kw: Any) -> tuple[ConflictReporter, CollectorRegistry]:
    registry = CollectorRegistry()
    return ConflictReporter(store, ConflictMetrics.create(registry), **kw), registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def test_a_conflict_is_reported_once_on_the_pod_that_lost() -> None:
    recorder = Recorder()
    rep, registry = reporter(overcommitted_store(), recorder=recorder)
    rep.run_pass()
    rep.run_pass()
    assert [(e.pod_name, e.reason, e.event_type) for e in recorder.events] == [
        ("b", "PlacementConflict", "Warning")
    ]
    assert "node n1 is overcommitted" in recorder.events[0].note
    assert value(registry, "placement_webhook_conflicts_detected_total", kind="Overcommit") == 1
    assert value(registry, "placement_webhook_conflicts", kind="Overcommit") == 1


def test_a_standby_counts_conflicts_but_writes_no_events() -> None:
    recorder = Recorder()
    rep, registry = reporter(overcommitted_store(), recorder=recorder, is_leader=lambda: False)
    rep.run_pass()
    assert recorder.events == []
    assert value(registry, "placement_webhook_conflicts", kind="Overcommit") == 1


def test_a_resolved_conflict_leaves_the_list_and_the_gauge() -> None:
    store = overcommitted_store()
    rep, registry = reporter(store, recorder=Recorder())
    rep.run_pass()
    store.drop_pod("uid-b")
    rep.run_pass()
    assert rep.as_json()["conflicts"] == []
    assert value(registry, "placement_webhook_conflicts", kind="Overcommit") == 0
    assert value(registry, "placement_webhook_conflicts_detected_total", kind="Overcommit") == 1


def test_the_debug_list_names_node_culprit_and_who_placed_it() -> None:
    rep, _ = reporter(overcommitted_store())
    rep.run_pass()
    (entry,) = rep.as_json()["conflicts"]
    assert entry["kind"] == "Overcommit" and entry["node"] == "n1"
    assert entry["culprits"] == [entry["lastArrived"]]
    assert entry["culprits"][0]["name"] == "b"
    assert entry["culprits"][0]["placedBy"] == "placement-webhook"
    assert entry["details"]["cpu"] == {"requested": 2000, "allocatable": 1000}


def test_report_mode_never_evicts() -> None:
    api = EvictionApi()
    rep, _ = reporter(overcommitted_store(), client=api, evict=False)
    rep.run_pass()
    assert api.posted == []


def test_evict_mode_evicts_the_culprit_once_and_says_so_on_the_pod() -> None:
    api, recorder = EvictionApi(), Recorder()
    rep, registry = reporter(overcommitted_store(), client=api, evict=True, recorder=recorder)
    rep.run_pass()
    rep.run_pass()
    assert api.posted == ["b"]
    assert [e.action for e in recorder.events] == ["Report", "Evict"]
    assert value(registry, "placement_webhook_conflict_evictions_total", result="evicted") == 1


def test_an_eviction_refused_by_a_disruption_budget_is_tried_again() -> None:
    api = EvictionApi({"b": 429})
    rep, registry = reporter(overcommitted_store(), client=api, evict=True)
    rep.run_pass()
    rep.run_pass()
    assert api.posted == ["b", "b"]
    assert value(registry, "placement_webhook_conflict_evictions_total", result="blocked") == 2


def test_a_standby_does_not_evict() -> None:
    api = EvictionApi()
    rep, _ = reporter(overcommitted_store(), client=api, evict=True, is_leader=lambda: False)
    rep.run_pass()
    assert api.posted == []


def test_a_refused_eviction_asks_for_another_pass_and_a_granted_one_does_not() -> None:
    blocked, _ = reporter(overcommitted_store(), client=EvictionApi({"b": 429}), evict=True)
    blocked.run_pass()
    granted, _ = reporter(overcommitted_store(), client=EvictionApi(), evict=True)
    granted.run_pass()
    assert (blocked.retry_evictions, granted.retry_evictions) == (True, False)


def test_the_warning_says_who_placed_the_pod_and_why_it_lost() -> None:
    recorder = Recorder()
    store = overcommitted_store()
    rep, _ = reporter(store, recorder=recorder)
    rep.run_pass()
    assert recorder.events[0].note.endswith(
        "placed by placement-webhook (admission); this pod lost: "
        "a kubelet admitting the node's pods in arrival order would reject it"
    )


def test_a_single_pod_conflict_is_reported_without_an_arrival_story() -> None:
    recorder = Recorder()
    store = ConflictStore()
    store.put_node(node("n1", labels={"disk": "hdd"}))
    store.put_pod(pod("a", "n1", by="binding", nodeSelector={"disk": "ssd"}))
    rep, _ = reporter(store, recorder=recorder)
    rep.run_pass()
    (event,) = recorder.events
    assert event.note == (
        "NodeAffinity: pod default/a is on n1, which does not match its nodeSelector; "
        "placed by kube-scheduler (default-scheduler)"
    )


def test_passes_after_the_first_see_changes_and_the_safety_pass_agrees() -> None:
    store = overcommitted_store()
    rep, _ = reporter(store, safety_every=2)
    assert [c.kind for c in rep.run_pass().conflicts] == ["Overcommit"]  # full: first sync
    store.put_node(node("n1", cpu="2"))
    assert rep.run_pass().conflicts == ()  # incremental
    store.put_pod(pod("c", "n1", at=at(3)))
    (found,) = rep.run_pass().conflicts  # incremental
    assert [p.name for p in found.culprits] == ["c"]
    again = rep.run_pass()  # the safety pass: a fresh detector over a full copy
    assert again.conflicts == (found,) and again.new == ()


def test_a_replaced_detector_is_freed_without_the_collector() -> None:
    import gc
    import weakref

    store = overcommitted_store()
    rep, _ = reporter(store, safety_every=1)
    rep.run_pass()
    rep.run_pass()
    old = weakref.ref(rep._detector)  # type: ignore[arg-type]
    gc.disable()
    try:
        rep.run_pass()  # due: a fresh detector replaces the old one
        assert old() is None
    finally:
        gc.enable()
