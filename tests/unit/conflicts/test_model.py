"""Who placed a pod, and when it arrived on its node."""

from __future__ import annotations

from tests.unit.conflicts.builders import pod
from webhook.admission.patch import SELECTED_NODE
from webhook.conflicts.model import (
    BOUND_BY_ANNOTATION,
    DIRECT,
    KUBE_SCHEDULER,
    KUBELET,
    OTHER_SCHEDULER,
    SELECTED_NODE_ANNOTATION,
    WEBHOOK,
    PodRecord,
    provenance,
)


def test_the_annotation_names_match_the_admission_path() -> None:
    assert SELECTED_NODE_ANNOTATION == SELECTED_NODE


def test_pod_with_our_selected_node_annotation_was_placed_by_this_webhook() -> None:
    assert provenance(pod("p", "n1", by="webhook")).placed_by == WEBHOOK
    assert provenance(pod("p", "n1", by="webhook")).detail == "admission"


def test_pod_bound_by_our_reconciler_names_it() -> None:
    raw = pod("p", "n1", by="binding", scheduler="placement-webhook")
    raw["metadata"]["annotations"] = {
        SELECTED_NODE_ANNOTATION: "n1",
        BOUND_BY_ANNOTATION: "reconciler/r-1",
    }
    prov = provenance(raw)
    assert (prov.placed_by, prov.detail, prov.via_binding) == (WEBHOOK, "reconciler/r-1", True)


def test_annotation_naming_another_node_is_not_taken_as_ours() -> None:
    raw = pod("p", "n2", by="binding")
    raw["metadata"]["annotations"] = {SELECTED_NODE_ANNOTATION: "n1"}
    assert provenance(raw).placed_by == KUBE_SCHEDULER


def test_pod_bound_through_a_binding_for_the_default_scheduler_was_placed_by_kube_scheduler() -> (
    None
):
    prov = provenance(pod("p", "n1", by="binding"))
    assert (prov.placed_by, prov.via_binding) == (KUBE_SCHEDULER, True)


def test_pod_bound_through_a_binding_for_another_scheduler_names_that_scheduler() -> None:
    prov = provenance(pod("p", "n1", by="binding", scheduler="volcano"))
    assert (prov.placed_by, prov.detail) == (OTHER_SCHEDULER, "volcano")


def test_pod_created_with_a_node_name_was_placed_directly_by_its_field_manager() -> None:
    prov = provenance(pod("p", "n1", by="direct"))
    assert (prov.placed_by, prov.detail) == (DIRECT, "kubectl")


def test_a_mirror_pod_was_placed_by_its_kubelet() -> None:
    raw = pod("p", "n1", by="direct")
    raw["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "hash"
    assert provenance(raw).placed_by == KUBELET


def test_without_managed_fields_the_scheduler_name_decides() -> None:
    raw = pod("p", "n1", by="direct")
    del raw["metadata"]["managedFields"]
    assert provenance(raw).placed_by == KUBE_SCHEDULER


def test_a_bound_pod_arrives_when_it_was_bound_and_a_direct_one_when_it_was_created() -> None:
    bound = PodRecord.from_dict(
        pod("b", "n1", by="binding", at="2024-05-01T10:00:00Z", bound_at="2024-05-01T10:00:07Z")
    )
    direct = PodRecord.from_dict(pod("d", "n1", by="direct", at="2024-05-01T10:00:05Z"))
    assert bound.arrived == "2024-05-01T10:00:07Z"
    assert direct.arrived == "2024-05-01T10:00:05Z"
    assert sorted([bound, direct], key=lambda r: r.arrival)[-1] is bound


def test_arrival_ties_are_broken_by_resource_version_then_name() -> None:
    a = PodRecord.from_dict(pod("a", "n1", rv=20))
    b = PodRecord.from_dict(pod("b", "n1", rv=9))
    c = PodRecord.from_dict(pod("c", "n1", rv=9))
    assert [r.view.name for r in sorted([a, b, c], key=lambda r: r.arrival)] == ["b", "c", "a"]


def test_terminating_and_finished_pods_do_not_count_against_their_node() -> None:
    assert PodRecord.from_dict(pod("p", "n1")).counted
    assert not PodRecord.from_dict(pod("p", "n1", terminating=True)).counted
    assert not PodRecord.from_dict(pod("p", "n1", phase="Succeeded")).counted
    assert not PodRecord.from_dict(pod("p", None)).counted


def test_the_controller_owner_is_recorded() -> None:
    record = PodRecord.from_dict(pod("p", "n1", owner="StatefulSet"))
    assert record.owner is not None and record.owner.kind == "StatefulSet"
    assert PodRecord.from_dict(pod("p", "n1", owner=None)).owner is None
