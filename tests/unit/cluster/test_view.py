"""The cluster view: reservations, their hand-over to real pods, staleness."""

from __future__ import annotations

from typing import Any

from webhook.cluster.source import WATCHED
from webhook.cluster.view import KINDS, RESERVATION_ANNOTATION, ClusterView
from webhook.policy.model import PodView
from webhook.policy.profile import default_policy

PROFILE = default_policy().profile_for("")
assert PROFILE is not None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def node(name: str, cpu: str = "1") -> dict[str, Any]:
    capacity = {"cpu": cpu, "memory": "4Gi", "pods": "110"}
    return {"kind": "Node", "metadata": {"name": name, "labels": {}}, "spec": {},
            "status": {"capacity": capacity, "allocatable": capacity}}  # fmt: skip


def pod(name: str, node_name: str | None = None, reservation: str | None = None,
        cpu: str = "1") -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if reservation:
        meta["annotations"] = {RESERVATION_ANNOTATION: reservation}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def one_node_view(clock: Clock | None = None) -> ClusterView:
    view = ClusterView(clock=clock or Clock())
    view.replace("Node", [[node("n1")]])
    view.replace("Pod", [[]])
    view.replace("Namespace", [[]])
    return view


def place(view: ClusterView, name: str, ttl: float | None = 30.0) -> tuple[str | None, str | None]:
    decision, key = view.place(PodView.from_dict(pod(name)), PROFILE, reserve_for=ttl)
    return decision.node, key


def test_a_reservation_holds_the_slot_until_it_expires() -> None:
    clock = Clock()
    view = one_node_view(clock)
    assert place(view, "a")[0] == "n1"
    assert place(view, "b")[0] is None  # the slot is held
    clock.now += 31
    assert place(view, "c")[0] == "n1"  # expired, so free again


def test_a_dry_run_decision_reserves_nothing() -> None:
    view = one_node_view()
    node_name, key = place(view, "a", ttl=None)
    assert node_name == "n1" and key is None
    assert view.reservations() == []
    assert place(view, "b")[0] == "n1"


def test_the_bound_pod_replaces_its_reservation_without_double_counting() -> None:
    clock = Clock()
    view = one_node_view(clock)
    fulfilled: list[str] = []
    view.on_fulfilled = lambda obj, r: fulfilled.append(r.node)
    _, key = place(view, "a")

    view.apply("Pod", "ADDED", pod("a", "n1", reservation=key))

    assert view.reservations() == []
    assert fulfilled == ["n1"]
    clock.now += 60  # the real pod keeps counting after the TTL
    assert place(view, "b")[0] is None


def test_a_pinned_pod_still_pending_keeps_its_reservation_alive() -> None:
    clock = Clock()
    view = one_node_view(clock)
    _, key = place(view, "a")
    clock.now += 25
    view.apply("Pod", "ADDED", pod("a", None, reservation=key))  # nodeAffinity mode: unbound
    clock.now += 25  # past the original TTL, but the pod was seen 25 s ago

    assert [r.key for r in view.reservations()] == [key]
    assert place(view, "b")[0] is None


def test_deleting_a_pending_pinned_pod_releases_its_reservation() -> None:
    view = one_node_view()
    _, key = place(view, "a")
    view.apply("Pod", "ADDED", pod("a", None, reservation=key))
    view.apply("Pod", "DELETED", pod("a", None, reservation=key))
    assert view.reservations() == []
    assert place(view, "b")[0] == "n1"


def test_relist_drops_objects_that_are_gone() -> None:
    view = one_node_view()
    view.replace("Node", [[node("n1"), node("n2")]])
    assert view.node_count() == 2
    view.replace("Node", [[node("n2")]])
    assert view.node_count() == 1


def test_sync_state_reports_unsynced_until_every_kind_is_listed_and_then_age() -> None:
    clock = Clock()
    view = ClusterView(clock=clock)
    assert not view.sync_state().synced
    for kind in KINDS:
        assert not view.sync_state().synced
        view.replace(kind, [[]])
    clock.now += 7
    state = view.sync_state()
    assert state.synced and state.age_seconds == 7
    for kind in KINDS[:-1]:
        view.touch(kind)
    assert view.sync_state().age_seconds == 7  # the slowest watch counts
    view.touch(KINDS[-1])
    assert view.sync_state().age_seconds == 0


def test_the_view_is_fed_every_watched_collection() -> None:
    assert [kind for kind, _ in WATCHED] == list(KINDS)


def _default_spread_score(view: ClusterView) -> dict[str, int]:
    new = pod("new", cpu="100m")
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "controller": True}
    new["metadata"].update(labels={"app": "web"}, ownerReferences=[owner])
    decision, _ = view.place(PodView.from_dict(new), PROFILE, reserve_for=None)
    return {n: s.get("PodTopologySpread", -1) for n, s in decision.scores.items()}


def test_services_and_replicasets_from_the_watch_drive_default_spreading() -> None:
    view = ClusterView()
    nodes = [node("n1"), node("n2")]
    for n in nodes:
        n["metadata"]["labels"] = {"kubernetes.io/hostname": n["metadata"]["name"]}
    view.replace("Node", [nodes])
    sibling = pod("old", "n1", cpu="100m")
    sibling["metadata"]["labels"] = {"app": "web"}
    view.replace("Pod", [[sibling]])
    assert _default_spread_score(view) == {"n1": -1, "n2": -1}  # nothing selects the pod

    rs = {"kind": "ReplicaSet", "metadata": {"name": "web-1", "namespace": "ns"},
          "spec": {"selector": {"matchLabels": {"app": "web"}}}}  # fmt: skip
    view.replace("ReplicaSet", [[rs]])
    spread = _default_spread_score(view)
    assert spread["n2"] > spread["n1"]  # away from its sibling

    view.apply("ReplicaSet", "DELETED", rs)
    service = {"kind": "Service", "metadata": {"name": "web", "namespace": "ns"},
               "spec": {"selector": {"app": "web"}}}  # fmt: skip
    view.apply("Service", "ADDED", service)
    assert _default_spread_score(view) == spread  # the Service selects the same siblings
    view.replace("Service", [[]])  # gone at the next list
    assert _default_spread_score(view) == {"n1": -1, "n2": -1}


def test_namespace_labels_are_unknown_until_the_namespace_is_seen() -> None:
    view = one_node_view()
    assert view.namespace_labels("apps") is None
    view.apply("Namespace", "ADDED", {"metadata": {"name": "apps", "labels": {"a": "b"}}})
    assert view.namespace_labels("apps") == {"a": "b", "kubernetes.io/metadata.name": "apps"}


def test_a_released_reservation_frees_its_slot_before_its_ttl() -> None:
    view = one_node_view()
    node_name, key = place(view, "a")
    assert node_name == "n1" and key is not None
    assert place(view, "b", ttl=None)[0] is None
    assert view.release(key)
    assert place(view, "b", ttl=None)[0] == "n1"
    assert not view.release(key)
