"""The cluster view: reservations in the ledger, their hand-over to real pods, staleness."""

from __future__ import annotations

from typing import Any

from webhook.cluster.ledger import BINDER
from webhook.cluster.source import WATCHED
from webhook.cluster.view import KINDS, ClusterView
from webhook.policy.marks import RESERVATION as RESERVATION_ANNOTATION
from webhook.policy.marks import SELECTED_NODE as SELECTED_NODE_ANNOTATION
from webhook.policy.model import PodView
from webhook.policy.policy_file import default_policy

PROFILE = default_policy().profile_for("")
assert PROFILE is not None
HOLD = 5.0


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
        cpu: str = "1", pinned: str | None = None) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    annotations = {}
    if reservation:
        annotations[RESERVATION_ANNOTATION] = reservation
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeName"] = node_name
    if pinned:
        annotations[SELECTED_NODE_ANNOTATION] = pinned
        pin = {"key": "metadata.name", "operator": "In", "values": [pinned]}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [pin]}]}}}  # fmt: skip
    meta["annotations"] = annotations
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def view_of(*nodes: dict[str, Any], clock: Clock | None = None) -> ClusterView:
    view = ClusterView(clock=clock or Clock())
    view.replace("Node", [list(nodes) or [node("n1")]])
    view.replace("Pod", [[]])
    view.replace("Namespace", [[]])
    return view


def place(view: ClusterView, name: str, hold: float | None = HOLD, cpu: str = "1",
          origin: str = "admission") -> tuple[str | None, str | None]:  # fmt: skip
    placement = view.place(PodView.from_dict(pod(name, cpu=cpu)), PROFILE, hold_for=hold,
                           origin=origin)  # fmt: skip
    return placement.decision.node if not placement.held_back else None, placement.key


def test_a_reservation_holds_the_slot_until_its_deadline() -> None:
    clock = Clock()
    view = view_of(clock=clock)
    assert place(view, "a")[0] == "n1"
    assert place(view, "b")[0] is None  # the slot is held
    clock.now += HOLD + 0.1
    assert place(view, "c")[0] == "n1"  # no pod came: expired, so free again
    assert view.ledger_counts()["expired"] == 1


def test_a_dry_run_decision_reserves_nothing() -> None:
    view = view_of()
    node_name, key = place(view, "a", hold=None)
    assert node_name == "n1" and key is None
    assert view.reservations() == []
    assert place(view, "b")[0] == "n1"


def test_the_bound_pod_replaces_its_reservation_without_double_counting() -> None:
    clock = Clock()
    view = view_of(clock=clock)
    fulfilled: list[str] = []
    view.on_fulfilled = lambda obj, r: fulfilled.append(r.node)
    _, key = place(view, "a")

    view.apply("Pod", "ADDED", pod("a", "n1", reservation=key))

    assert view.reservations() == []
    assert fulfilled == ["n1"]
    clock.now += 60  # the real pod keeps counting after the deadline
    assert place(view, "b")[0] is None


def test_a_pending_pod_pinned_by_us_counts_on_its_node_in_every_view() -> None:
    placing, other = view_of(node("n1"), node("n2")), view_of(node("n1"), node("n2"))
    first, key = place(placing, "a")
    assert first is not None
    pinned = pod("a", None, reservation=key, pinned=first)

    for view in (placing, other):  # the replica that reserved, and one that never did
        view.apply("Pod", "ADDED", pinned)
        assert view.reservations() == []
        assert place(view, "b", hold=None)[0] not in (None, first)


def test_a_pending_pod_that_is_not_pinned_keeps_its_reservation_until_bound_or_its_deadline() -> (
    None
):
    clock = Clock()
    view = view_of(clock=clock)
    _, key = place(view, "a")
    view.apply("Pod", "ADDED", pod("a", None, reservation=key))  # only preferred: not pinned
    assert [r.key for r in view.reservations()] == [key]
    assert place(view, "b", hold=None)[0] is None
    view.apply("Pod", "MODIFIED", pod("a", "n1", reservation=key))  # kube-scheduler bound it
    assert view.reservations() == []
    assert place(view, "b", hold=None)[0] is None


def test_deleting_a_pod_that_carries_a_key_releases_its_reservation() -> None:
    view = view_of()
    _, key = place(view, "a")
    view.apply("Pod", "ADDED", pod("a", None, reservation=key))
    view.apply("Pod", "DELETED", pod("a", None, reservation=key))
    assert view.reservations() == []
    assert place(view, "b")[0] == "n1"


def test_a_released_reservation_frees_its_slot_before_its_deadline() -> None:
    view = view_of()
    node_name, key = place(view, "a")
    assert node_name == "n1" and key is not None
    assert place(view, "b", hold=None)[0] is None
    assert view.release(key)
    assert place(view, "b", hold=None)[0] == "n1"
    assert not view.release(key)


def test_admission_reservations_past_the_share_cap_are_held_back_but_the_first_passes() -> None:
    view = view_of(node("n1", cpu="4"), node("n2", cpu="4"))  # 8 cpu, half of it is 4
    assert place(view, "huge", cpu="3")[0] is not None  # the first always passes
    assert place(view, "more", cpu="2")[0] is None  # 3 + 2 > 4: held back
    assert place(view, "small", cpu="1")[0] is not None  # 3 + 1 <= 4
    assert place(view, "bind", cpu="2", origin=BINDER)[0] is not None  # pods that exist


def test_a_decision_that_could_only_start_after_its_deadline_is_not_made() -> None:
    clock = Clock()
    view = view_of(clock=clock)
    placement = view.place(PodView.from_dict(pod("a")), PROFILE, hold_for=HOLD,
                           give_up_at=clock.now - 0.001)  # fmt: skip
    assert placement.held_back == "deadline" and placement.key is None
    assert view.reservations() == []


def test_a_recheck_keeps_the_node_while_the_changed_pod_still_fits() -> None:
    view = view_of(node("n1", cpu="2"), node("n2", cpu="2"))
    first, key = place(view, "a")
    assert first is not None and key is not None
    bigger = PodView.from_dict(pod("a", cpu="2"))
    again = view.recheck(bigger, PROFILE, first, key=key, hold_for=HOLD)
    assert again.decision.node == first and again.key == key
    assert [r.cpu for r in view.reservations()] == [2000]  # the changed pod counts, once


def test_a_recheck_moves_a_pod_that_no_longer_fits_and_undoes_one_that_fits_nowhere() -> None:
    view = view_of(node("n1", cpu="2"), node("n2", cpu="4"))
    view.apply("Pod", "ADDED", pod("filler", "n1", cpu="1"))
    key = view.place(PodView.from_dict(pod("a", cpu="1")), PROFILE, hold_for=HOLD).key
    assert key is not None

    moved = view.recheck(PodView.from_dict(pod("a", cpu="2")), PROFILE, "n1", key=key,
                         hold_for=HOLD)  # fmt: skip
    assert moved.decision.node == "n2" and moved.key == key
    gone = view.recheck(PodView.from_dict(pod("a", cpu="9")), PROFILE, "n2", key=key,
                        hold_for=HOLD)  # fmt: skip
    assert gone.decision.node is None and gone.key is None
    assert view.reservations() == []


def test_relist_drops_objects_that_are_gone() -> None:
    view = view_of()
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


def test_the_newest_pod_resource_version_comes_from_events_and_bookmarks() -> None:
    view = view_of()
    assert view.resource_version("Pod") == ""
    view.apply("Pod", "ADDED", {**pod("a"), "metadata": {**pod("a")["metadata"],
                                                         "resourceVersion": "41"}})  # fmt: skip
    assert view.resource_version("Pod") == "41"
    view.touch("Pod", "57")
    assert view.resource_version("Pod") == "57"


def test_the_view_is_fed_every_watched_collection() -> None:
    assert [kind for kind, _ in WATCHED] == list(KINDS)


def _default_spread_score(view: ClusterView) -> dict[str, int]:
    new = pod("new", cpu="100m")
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "controller": True}
    new["metadata"].update(labels={"app": "web"}, ownerReferences=[owner])
    decision = view.place(PodView.from_dict(new), PROFILE, hold_for=None).decision
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
    view = view_of()
    assert view.namespace_labels("apps") is None
    view.apply("Namespace", "ADDED", {"metadata": {"name": "apps", "labels": {"a": "b"}}})
    assert view.namespace_labels("apps") == {"a": "b", "kubernetes.io/metadata.name": "apps"}
