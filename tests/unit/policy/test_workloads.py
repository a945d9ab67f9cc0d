"""The default spreading selector, as kube-scheduler's helper.DefaultSelector builds it."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.policy.dump import snapshot_from_list
from webhook.policy.model import PodView
from webhook.policy.selectors import LabelRequirement, LabelSelector
from webhook.policy.workload_index import WorkloadSelectors
from webhook.policy.workloads import ControllerRef, WorkloadView

RS = ControllerRef("apps/v1", "ReplicaSet", "web-7d9")


def workload(kind: str, name: str, selector: Any, namespace: str = "shop") -> dict[str, Any]:
    api = "v1" if kind in ("Service", "ReplicationController") else "apps/v1"
    spec = {} if selector is None else {"selector": selector}
    return {"apiVersion": api, "kind": kind,
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}  # fmt: skip


def store(*objects: dict[str, Any]) -> WorkloadSelectors:
    out = WorkloadSelectors()
    for obj in objects:
        out.upsert(WorkloadView.from_dict(obj["kind"], obj))
    return out


def eq(key: str, value: str) -> LabelRequirement:
    return LabelRequirement(key, "In", frozenset((value,)))


WEB = {"app": "web", "tier": "front", "pod-template-hash": "7d9"}


def test_selectors_of_every_service_selecting_the_pod_are_merged() -> None:
    s = store(
        workload("Service", "web", {"app": "web"}),
        workload("Service", "front", {"tier": "front"}),
        workload("Service", "db", {"app": "db"}),
        workload("Service", "web-elsewhere", {"app": "web", "zone": "x"}),
    )
    assert s.default_selector("shop", WEB, None) == LabelSelector(
        (eq("app", "web"), eq("tier", "front"))
    )


def test_services_of_other_namespaces_and_without_selector_select_nothing() -> None:
    s = store(
        workload("Service", "web", {"app": "web"}, namespace="other"),
        workload("Service", "headless", None),
        workload("Service", "empty", {}),
    )
    assert s.default_selector("shop", WEB, None).requirements == ()


def test_a_replicasets_requirements_are_added_to_the_service_selector() -> None:
    rs = {"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "pod-template-hash", "operator": "In", "values": ["7d9"]}]}  # fmt: skip
    s = store(workload("Service", "web", {"app": "web"}), workload("ReplicaSet", "web-7d9", rs))
    sel = s.default_selector("shop", WEB, RS)
    assert sel.requirements == (eq("app", "web"), eq("pod-template-hash", "7d9"))  # app=web once


def test_a_statefulset_is_looked_up_by_name() -> None:
    s = store(workload("StatefulSet", "db", {"matchLabels": {"app": "db"}}))
    owner = ControllerRef("apps/v1", "StatefulSet", "db")
    assert s.default_selector("shop", {"app": "db"}, owner) == LabelSelector((eq("app", "db"),))


def test_a_replication_controllers_selector_map_is_merged() -> None:
    s = store(workload("ReplicationController", "legacy", {"app": "old", "v": "1"}))
    owner = ControllerRef("v1", "ReplicationController", "legacy")
    sel = s.default_selector("shop", {"app": "old", "v": "1"}, owner)
    assert sel == LabelSelector((eq("app", "old"), eq("v", "1")))


@pytest.mark.parametrize(
    "owner",
    [
        ControllerRef("extensions/v1beta1", "ReplicaSet", "web-7d9"),  # not apps/v1
        ControllerRef("apps/v1", "Deployment", "web"),  # not a kind DefaultSelector knows
        ControllerRef("apps/v1", "ReplicaSet", "gone"),  # not found
        ControllerRef("apps/v1", "StatefulSet", "web-7d9"),  # found only under another kind
    ],
    ids=["other-group", "other-kind", "not-found", "kind-mismatch"],
)
def test_owners_kube_scheduler_does_not_look_up_add_nothing(owner: ControllerRef) -> None:
    s = store(workload("ReplicaSet", "web-7d9", {"matchLabels": {"app": "web"}}))
    assert s.default_selector("shop", WEB, owner).requirements == ()


def test_updates_and_deletions_are_seen() -> None:
    s = store(workload("Service", "web", {"app": "web"}))
    s.upsert(WorkloadView.from_dict("Service", workload("Service", "web", {"tier": "front"})))
    assert s.default_selector("shop", WEB, None) == LabelSelector((eq("tier", "front"),))
    s.remove("Service", "shop/web")
    assert s.default_selector("shop", WEB, None).requirements == ()
    assert len(s) == 0


def test_an_invalid_replicaset_selector_adds_nothing() -> None:
    bad = {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["b"]}]}
    s = store(workload("ReplicaSet", "web-7d9", bad))
    assert s.default_selector("shop", WEB, RS).requirements == ()


def test_a_snapshot_list_carries_services_and_controllers() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "shop", "labels": WEB,
           "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                "name": "web-7d9", "controller": True}]}, "spec": {}}  # fmt: skip
    snap = snapshot_from_list({"items": [
        workload("Service", "web", {"app": "web"}),
        workload("ReplicaSet", "web-7d9", {"matchLabels": {"pod-template-hash": "7d9"}}),
    ]})  # fmt: skip
    view = PodView.from_dict(pod)
    assert view.controller == RS
    sel = snap.workloads.default_selector(view.namespace, view.labels, view.controller)
    assert sel == LabelSelector((eq("app", "web"), eq("pod-template-hash", "7d9")))
