"""The settings that make admission cheaper for the cluster (PlacementPolicy fields).

Through the real HTTP app and view (no cluster): decision annotation detail,
the topology labels that spare the API server a second webhook call, and the
Scheduled event switch.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.unit.admission.test_app import make_view, node, patched, pod, post, review
from webhook.admission.app import create_app
from webhook.admission.patch import (
    FILTER_RESULT,
    FINALSCORE_RESULT,
    RESERVATION,
    SCORE_RESULT,
    SELECTED_NODE,
)
from webhook.admission.placement import Placer, PlacerSettings
from webhook.admission.server import scheduled_announcer
from webhook.policy.placement_policy import DecisionDetail, Mode, PlacementSettings
from webhook.policy.policy_file import Policy, default_policy, load_policy
from webhook.policy.policy_yaml import PolicyError

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"


def place(obj: dict[str, Any], **settings: Any) -> dict[str, Any]:
    view = make_view(
        [
            node("small", cpu="1", **{ZONE: "z1", REGION: "r1"}),
            node("big", cpu="8", **{ZONE: "z2", REGION: "r1", "pool": "x"}),
            node("tainted", cpu="8", **{ZONE: "z3"})
            | {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}},
        ]
    )
    placement = PlacementSettings(**settings)
    app = create_app(Placer(view, Policy(default_policy().profiles, placement), PlacerSettings()))
    return patched(obj, post(app.test_client(), review(obj)).get_json())


def test_summary_is_the_default_and_bounded() -> None:
    notes = place(pod(cpu="2"))["metadata"]["annotations"]

    assert notes[SELECTED_NODE] == "big" and RESERVATION in notes
    assert orjson.loads(notes[FILTER_RESULT])["feasible"] == 1
    assert set(orjson.loads(notes[FINALSCORE_RESULT])) == {"big"}


def test_minimal_carries_only_the_marks() -> None:
    placed = place(pod(cpu="2"), decision_annotations=DecisionDetail.MINIMAL)
    notes = placed["metadata"]["annotations"]

    assert set(notes) == {SELECTED_NODE, RESERVATION}


def test_full_lists_every_node_as_kube_scheduler_simulator_does() -> None:
    notes = place(pod(cpu="2"), decision_annotations=DecisionDetail.FULL)["metadata"]["annotations"]

    filtered = orjson.loads(notes[FILTER_RESULT])
    assert set(filtered) == {"small", "big", "tainted"}
    assert set(filtered["big"].values()) == {"passed"}
    assert filtered["small"]["NodeResourcesFit"] == "Insufficient cpu"
    assert filtered["small"]["TaintToleration"] == "passed"  # ran before the one that failed
    assert "NodeResourcesFit" not in filtered["tainted"]  # not run after the rejection
    assert filtered["tainted"]["TaintToleration"] != "passed"
    raw, final = orjson.loads(notes[SCORE_RESULT]), orjson.loads(notes[FINALSCORE_RESULT])
    assert set(raw) == set(final) == {"big"}
    assert final["big"]["TaintToleration"] == 3 * raw["big"]["TaintToleration"]


def test_a_pod_bound_by_node_name_gets_its_nodes_topology_labels() -> None:
    placed = place(pod(cpu="2"))

    assert placed["metadata"]["labels"] == {ZONE: "z2", REGION: "r1"}


def test_existing_labels_are_kept_and_a_stale_zone_overwritten() -> None:
    obj = pod(cpu="2")
    obj["metadata"]["labels"] = {"app": "web", ZONE: "elsewhere"}

    assert place(obj)["metadata"]["labels"] == {"app": "web", ZONE: "z2", REGION: "r1"}


def test_no_topology_labels_when_turned_off_or_in_node_affinity_mode() -> None:
    assert "labels" not in place(pod(cpu="2"), copy_topology_labels=False)["metadata"]
    assert "labels" not in place(pod(cpu="2"), mode=Mode.NODE_AFFINITY)["metadata"]


def test_scheduled_events_can_be_turned_off() -> None:
    sink: Any = object()

    assert scheduled_announcer(sink, PlacementSettings()) is not None
    assert scheduled_announcer(sink, PlacementSettings(scheduled_events=False)) is None
    assert scheduled_announcer(sink, PlacementSettings(mode=Mode.NODE_AFFINITY)) is None


def test_the_policy_file_sets_them_and_refuses_bad_values() -> None:
    doc = "apiVersion: placement-webhook.io/v1alpha1\nkind: PlacementPolicy\n"
    settings = load_policy(
        doc + "decisionAnnotations: full\nscheduledEvents: false\ncopyTopologyLabels: false\n"
    ).placement
    assert settings.decision_annotations is DecisionDetail.FULL
    assert settings.scheduled_events is False
    assert settings.copy_topology_labels is False
    with pytest.raises(PolicyError, match="decisionAnnotations"):
        load_policy(doc + "decisionAnnotations: everything\n")
    with pytest.raises(PolicyError, match="scheduledEvents"):
        load_policy(doc + "scheduledEvents: 'no'\n")


def test_a_pod_moved_on_reinvocation_gets_the_new_nodes_zone() -> None:
    view = make_view([node("a", cpu="2", **{ZONE: "za"}), node("b", cpu="4", **{ZONE: "zb"})])
    client = create_app(Placer(view, Policy(default_policy().profiles), PlacerSettings()))
    first = patched(
        pod(cpu="1500m"), post(client.test_client(), review(pod(cpu="1500m"))).get_json()
    )
    first["spec"]["nodeName"] = "a"  # as if the first choice was the small node
    first["metadata"]["annotations"][SELECTED_NODE] = "a"
    first["metadata"]["labels"][ZONE] = "za"
    first["spec"]["containers"].append(
        {"name": "proxy", "image": "proxy", "resources": {"requests": {"cpu": "1"}}}
    )

    moved = patched(first, post(client.test_client(), review(first, uid="u2")).get_json())

    assert moved["spec"]["nodeName"] == "b"
    assert moved["metadata"]["labels"][ZONE] == "zb"
