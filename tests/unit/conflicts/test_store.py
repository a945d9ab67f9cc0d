"""The conflict store keeps one record per pod and tells what changed."""

from __future__ import annotations

from tests.unit.conflicts.builders import node, pod
from webhook.conflicts.store import ConflictStore


def test_storing_the_same_pod_twice_changes_nothing() -> None:
    store = ConflictStore()
    store.put_pod(pod("a", "n1"))
    version = store.version
    old, new = store.put_pod(pod("a", "n1"))
    assert old == new and store.version == version


def test_a_changed_pod_returns_its_previous_record() -> None:
    store = ConflictStore()
    store.put_pod(pod("a", None))
    old, new = store.put_pod(pod("a", "n1"))
    assert old is not None and old.node is None
    assert new is not None and new.node == "n1"


def test_an_unparsable_pod_is_dropped_and_counted() -> None:
    store = ConflictStore()
    store.put_pod(pod("a", "n1"))
    _, new = store.put_pod(pod("a", "n1", cpu="lots"))
    assert new is None and store.pod("uid-a") is None and store.unparsable == 1


def test_a_relist_forgets_what_is_gone() -> None:
    store = ConflictStore()
    store.put_node(node("n1"))
    store.put_node(node("n2"))
    store.keep_only("Node", {"n2"})
    assert store.node("n1") is None and store.node("n2") is not None


def test_a_copy_does_not_change_with_the_store() -> None:
    store = ConflictStore()
    store.put_pod(pod("a", "n1"))
    copy = store.copy()
    store.drop_pod("uid-a")
    assert [r.view.name for r in copy.pods] == ["a"]
