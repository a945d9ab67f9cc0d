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


def test_take_gives_the_latest_state_of_each_changed_object_once() -> None:
    store = ConflictStore()
    store.put_node(node("n1"))
    store.put_pod(pod("a", None))
    store.put_pod(pod("a", "n1"))
    store.put_pod(pod("b", "n1"))
    store.drop_pod("uid-b")
    delta = store.take()
    assert delta.full is None and delta.version == store.version
    changes = {(kind, key): new for kind, key, new in delta.changes}
    assert set(changes) == {("Node", "n1"), ("Pod", "uid-a"), ("Pod", "uid-b")}
    assert changes[("Pod", "uid-a")].node == "n1" and changes[("Pod", "uid-b")] is None
    assert store.take().changes == ()
    store.keep_only("Pod", set())
    (gone,) = store.take(full=True).changes
    assert gone == ("Pod", "uid-a", None)
