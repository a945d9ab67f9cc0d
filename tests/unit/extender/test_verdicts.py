"""The policy answering for exactly the nodes kube-scheduler asks about."""

from __future__ import annotations

import pytest

from tests.unit.extender.builders import node, pod, profile, snapshot
from webhook.extender.verdicts import (
    UNKNOWN_NODE,
    Scoring,
    filter_nodes,
    prioritize_nodes,
)
from webhook.policy.framework import schedule
from webhook.policy.model import PodView

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def test_only_the_asked_nodes_are_answered_for() -> None:
    snap = snapshot([node("a"), node("b"), node("small", cpu="1")])

    verdict = filter_nodes(PodView.from_dict(pod("p", cpu="2")), snap, profile(), ["a", "small"])

    assert verdict.passed == ("a",)
    assert set(verdict.failed) | set(verdict.unresolvable) == {"small"}


def test_a_full_node_fails_resolvably_and_a_taint_or_a_too_small_node_does_not() -> None:
    nodes = [
        node("full", cpu="2"),
        node("small", cpu="1"),
        node("tainted", taints=[TAINT]),
        node("ok"),
    ]
    snap = snapshot(nodes, [pod("x", cpu="1", node_name="full")])
    names = ["full", "small", "tainted", "ok"]

    verdict = filter_nodes(PodView.from_dict(pod("p", cpu="2")), snap, profile(), names)

    assert verdict.passed == ("ok",)
    assert verdict.failed == {"full": "Insufficient cpu"}
    assert verdict.unresolvable == {
        "small": "Insufficient cpu",
        "tainted": "node(s) had untolerated taint(s)",
    }


def test_a_node_missing_from_the_cache_fails_resolvably() -> None:
    snap = snapshot([node("a")])

    verdict = filter_nodes(PodView.from_dict(pod("p")), snap, profile(), ["a", "new"])

    assert verdict.passed == ("a",)
    assert verdict.failed == {"new": UNKNOWN_NODE}


def test_nodes_outside_a_metadata_name_affinity_fail_unresolvably() -> None:
    pinned = pod(
        "p",
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["b"]}
                            ]
                        }
                    ]
                }
            }
        },
    )
    snap = snapshot([node("a"), node("b")])

    verdict = filter_nodes(PodView.from_dict(pinned), snap, profile(), ["a", "b"])

    assert verdict.passed == ("b",)
    assert verdict.unresolvable == {"a": "node(s) didn't satisfy plugin(s) [NodeAffinity]"}


def test_pods_on_nodes_not_asked_about_still_count_for_spreading() -> None:
    zone = "topology.kubernetes.io/zone"
    spread = {
        "maxSkew": 1,
        "topologyKey": zone,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    nodes = [
        node("a1", labels={zone: "a"}),
        node("a2", labels={zone: "a"}),
        node("b1", labels={zone: "b"}),
    ]
    existing = [pod("w1", node_name="a1", labels={"app": "web"})]
    snap = snapshot(nodes, existing)
    new = PodView.from_dict(pod("w2", labels={"app": "web"}, topologySpreadConstraints=[spread]))

    verdict = filter_nodes(new, snap, profile(), ["a2", "b1"])

    assert verdict.passed == ("b1",)
    assert verdict.failed == {"a2": "node(s) didn't match pod topology spread constraints"}


def test_decisive_scores_give_the_policy_choice_ten_and_every_other_node_less() -> None:
    snap = snapshot([node("busy"), node("idle"), node("half")], [
        pod("x", cpu="3", node_name="busy"), pod("y", cpu="2", node_name="half"),
    ])  # fmt: skip

    result = prioritize_nodes(
        PodView.from_dict(pod("p")), snap, profile(), ["busy", "idle", "half"]
    )

    scores = dict(result.hosts)
    assert result.choice == "idle"
    assert scores["idle"] == 10
    assert max(s for n, s in scores.items() if n != "idle") <= 9


def test_linear_scores_keep_equal_nodes_equal() -> None:
    snap = snapshot([node("a"), node("b")])

    result = prioritize_nodes(
        PodView.from_dict(pod("p")), snap, profile(), ["a", "b"], Scoring.LINEAR
    )

    assert result.hosts[0][1] == result.hosts[1][1]
    assert all(0 <= s <= 10 for _, s in result.hosts)


@pytest.mark.parametrize("name", [f"pod-{i}" for i in range(12)])
def test_among_tied_nodes_the_choice_is_the_policys_for_this_pod_uid(name: str) -> None:
    snap = snapshot([node(f"n{i}") for i in range(6)])
    the_pod = PodView.from_dict(pod(name, uid=f"uid-{name}"))

    policy = schedule(the_pod, snap, profile(), seed=f"uid-{name}")
    result = prioritize_nodes(the_pod, snap, profile(), [f"n{i}" for i in range(6)])

    assert result.choice == policy.node


def test_tied_pods_spread_over_the_tied_nodes() -> None:
    snap = snapshot([node(f"n{i}") for i in range(6)])
    names = [f"n{i}" for i in range(6)]

    choices = {
        prioritize_nodes(PodView.from_dict(pod(f"p{i}")), snap, profile(), names).choice
        for i in range(30)
    }

    assert len(choices) > 1


def test_the_choice_is_made_among_the_asked_nodes_only() -> None:
    snap = snapshot([node("best", cpu="64"), node("ok"), node("also-ok")])

    result = prioritize_nodes(PodView.from_dict(pod("p")), snap, profile(), ["ok", "also-ok"])

    assert result.choice in {"ok", "also-ok"}
    assert [h for h, _ in result.hosts] == ["ok", "also-ok"]


def test_nodes_missing_from_the_cache_score_zero() -> None:
    snap = snapshot([node("a")])

    result = prioritize_nodes(PodView.from_dict(pod("p")), snap, profile(), ["ghost", "a"])

    assert dict(result.hosts) == {"ghost": 0, "a": 10}
