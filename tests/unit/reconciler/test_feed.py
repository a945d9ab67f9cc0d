"""Which pods the reconciler takes, and which cluster changes wake pending pods."""

from __future__ import annotations

from typing import Any

from tests.unit.conflicts.builders import node, pod
from webhook.cluster.view import ClusterView
from webhook.conflicts.model import PodRecord
from webhook.conflicts.store import ConflictStore
from webhook.policy.model import NodeView
from webhook.reconciler.feed import (
    Feed,
    is_pending_ours,
    node_event,
    pod_event,
    signature,
)
from webhook.reconciler.queue import ClusterEvent


def pending(**kw: Any) -> dict[str, Any]:
    return pod("p", None, scheduler="placement-webhook", phase="Pending", **kw)


def test_a_pending_pod_for_our_scheduler_name_is_ours() -> None:
    assert is_pending_ours(pending())


def test_bound_terminating_finished_or_foreign_pods_are_not_ours() -> None:
    assert not is_pending_ours(pod("p", "n1", scheduler="placement-webhook"))
    assert not is_pending_ours(pending(terminating=True))
    assert not is_pending_ours(pod("p", None, scheduler="placement-webhook", phase="Failed"))
    assert not is_pending_ours(pod("p", None, scheduler="default-scheduler", phase="Pending"))


def test_the_signature_ignores_status_and_versions_but_not_the_spec() -> None:
    a = pending()
    b = pending(rv=999)
    b["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    assert signature(a) == signature(b)
    assert signature(a) != signature(pending(cpu="2"))


def record(raw: dict[str, Any]) -> PodRecord:
    return PodRecord.from_dict(raw)


def test_pod_changes_become_cluster_events() -> None:
    bound, unbound = record(pod("a", "n1")), record(pod("a", None))
    gone = record(pod("a", "n1", terminating=True))
    assert pod_event(None, bound) is ClusterEvent.ASSIGNED_POD_ADD
    assert pod_event(unbound, bound) is ClusterEvent.ASSIGNED_POD_ADD
    assert pod_event(bound, None) is ClusterEvent.ASSIGNED_POD_DELETE
    assert pod_event(bound, gone) is ClusterEvent.ASSIGNED_POD_DELETE
    assert pod_event(bound, record(pod("a", "n1", cpu="500m"))) is ClusterEvent.ASSIGNED_POD_UPDATE
    assert pod_event(bound, record(pod("a", "n1", rv=7))) is None
    assert pod_event(None, unbound) is None


def test_node_changes_become_cluster_events_but_heartbeats_do_not() -> None:
    small = NodeView.from_dict(node("n1", cpu="1"))
    big = NodeView.from_dict(node("n1", cpu="8"))
    assert node_event(None, small) is ClusterEvent.NODE_ADD
    assert node_event(small, big) is ClusterEvent.NODE_UPDATE
    assert node_event(small, NodeView.from_dict(node("n1", cpu="1"))) is None
    assert node_event(small, None) is None


class Sink:
    def __init__(self) -> None:
        self.pods: list[tuple[str, bool]] = []
        self.events: list[ClusterEvent] = []

    def on_pod(self, uid: str, obj: Any) -> None:
        self.pods.append((uid, obj is not None))

    def on_event(self, event: ClusterEvent) -> None:
        self.events.append(event)


def test_the_feed_updates_view_and_records_and_reports_changes() -> None:
    view, store, sink = ClusterView(), ConflictStore(), Sink()
    feed = Feed(view, store, on_pod=sink.on_pod, on_event=sink.on_event)
    feed.replace("Node", iter([[node("n1")]]))
    feed.apply("Node", "ADDED", node("n2"))
    feed.apply("Pod", "ADDED", pod("a", "n1"))
    feed.apply("Pod", "DELETED", pod("a", "n1"))
    assert view.node_count() == 2
    assert store.node("n2") is not None and store.pod("uid-a") is None
    assert sink.events == [
        ClusterEvent.NODE_ADD, ClusterEvent.NODE_ADD,
        ClusterEvent.ASSIGNED_POD_ADD, ClusterEvent.ASSIGNED_POD_DELETE,
    ]  # fmt: skip
    assert sink.pods == [("uid-a", True), ("uid-a", False)]


def test_a_relist_drops_records_of_objects_that_are_gone() -> None:
    view, store, sink = ClusterView(), ConflictStore(), Sink()
    kept: list[set[str]] = []
    feed = Feed(view, store, on_pod=sink.on_pod, on_event=sink.on_event, on_relist=kept.append)
    feed.replace("Pod", iter([[pod("a", "n1"), pod("b", "n1")]]))
    assert feed.replace("Pod", iter([[pod("b", "n1")]])) == 1
    assert store.pod("uid-a") is None and store.pod("uid-b") is not None
    assert kept[-1] == {"uid-b"}


def test_services_and_controllers_reach_the_view_but_not_the_conflict_records() -> None:
    view, store, sink = ClusterView(), ConflictStore(), Sink()
    feed = Feed(view, store, on_pod=sink.on_pod, on_event=sink.on_event)
    feed.replace("Namespace", iter([[{"kind": "Namespace", "metadata": {"name": "shop"}}]]))
    service = {"kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
               "spec": {"selector": {"app": "web"}}}  # fmt: skip
    feed.replace("Service", iter([[service]]))
    feed.apply("Service", "MODIFIED", service)
    feed.replace("ReplicaSet", iter([[]]))
    assert list(store.copy().namespace_labels) == ["shop"]  # not wiped by the Service list
    assert sink.events == [] and sink.pods == []
    labels = {"app": "web"}
    assert view.evaluate(lambda s: s.workloads.services_selecting("shop", labels)) == ["shop/web"]


def test_the_view_and_the_conflict_records_share_one_parse_of_each_pod_and_node() -> None:
    view, store, sink = ClusterView(), ConflictStore(), Sink()
    feed = Feed(view, store, on_pod=sink.on_pod, on_event=sink.on_event)
    feed.replace("Node", iter([[node("n1")]]))
    feed.replace("Pod", iter([[pod("a", "n1")]]))
    feed.apply("Pod", "MODIFIED", pod("b", "n1"))
    feed.apply("Node", "ADDED", node("n2"))
    for uid in ("uid-a", "uid-b"):
        record = store.pod(uid)
        assert record is not None
        assert view.evaluate(lambda s, uid=uid: s.pod(uid)) is record.view
    for name in ("n1", "n2"):
        assert view.evaluate(lambda s, name=name: s.node(name)) is store.node(name)


def test_after_a_relist_the_view_and_the_records_still_share_unchanged_pods() -> None:
    view, store, sink = ClusterView(), ConflictStore(), Sink()
    feed = Feed(view, store, on_pod=sink.on_pod, on_event=sink.on_event)
    feed.replace("Node", iter([[node("n1")]]))
    feed.replace("Pod", iter([[pod("a", "n1")]]))
    feed.replace("Node", iter([[node("n1")]]))
    feed.replace("Pod", iter([[pod("a", "n1")]]))
    record = store.pod("uid-a")
    assert record is not None and view.evaluate(lambda s: s.pod("uid-a")) is record.view
    assert view.evaluate(lambda s: s.node("n1")) is store.node("n1")
