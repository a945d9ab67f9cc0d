"""Parity: same nodes across arms, and every disagreement explained by replaying the policy."""

from __future__ import annotations

from typing import Any

from experiments.parity import compare
from webhook.policy.policy_file import load_policy

POLICY = load_policy(
    "apiVersion: kubescheduler.config.k8s.io/v1\n"
    "kind: KubeSchedulerConfiguration\n"
    "profiles:\n"
    "  - schedulerName: default-scheduler\n"
    "    percentageOfNodesToScore: 100\n"
    "    pluginConfig:\n"
    "      - name: NodeResourcesFit\n"
    "        args: {scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 1}]}}\n"
)
PROFILE = POLICY.default_profile


def node(name: str, cpu: str) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "64Gi", "pods": "110"}
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": []},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def pod(name: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "bench", "labels": {}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
    }


# Packing (MostAllocated): the small node is the policy's first choice, then it stays the fullest.
NODES = [node("small", "4"), node("big", "16"), node("huge", "64")]
PODS = [pod("p0"), pod("p1"), pod("p2")]


def test_arms_that_choose_what_the_reference_chose_agree_fully() -> None:
    same = ["small", "small", "small"]

    result = compare(NODES, PODS, {"B": same, "D": same}, PROFILE)

    row = result["arms"]["D"]
    assert (row["agree"], row["compared"], row["agreement"]) == (3, 3, 1.0)
    assert row["policyOptimalRate"] == 1.0
    assert result["arms"]["B"]["policyChoice"] == 3


def test_a_lower_scored_choice_is_explained_and_later_ones_follow_from_it() -> None:
    result = compare(
        NODES, PODS, {"B": ["small", "small", "small"], "A": ["big", "small", "small"]}, PROFILE
    )

    row = result["arms"]["A"]
    assert row["disagreements"]["scoredLower"] == 1
    assert row["details"][0]["pod"] == "p0"
    assert "chose big" in row["details"][0]["reason"]
    assert row["agree"] == 2  # p1 and p2 still landed where B put them
    assert row["policyOptimal"] == 2


def test_a_node_the_policy_rejects_is_reported_with_the_reason() -> None:
    nodes = [node("tiny", "500m"), node("ok", "8")]

    result = compare(nodes, [pod("p0")], {"B": ["ok"], "E": ["tiny"]}, PROFILE)

    detail = result["arms"]["E"]["details"][0]
    assert detail["kind"] == "rejected"
    assert "Insufficient cpu" in detail["reason"]


def test_equal_scores_are_reported_as_a_tie() -> None:
    twins = [node("left", "8"), node("right", "8")]

    result = compare(twins, [pod("p0")], {"B": ["left"], "A": ["right"]}, PROFILE)

    row = result["arms"]["A"]
    assert row["disagreements"]["tie"] == 1
    assert row["policyOptimalRate"] == 1.0


def test_after_a_first_difference_later_ones_count_as_divergence() -> None:
    twins = [node("left", "8"), node("right", "8")]
    pods = [pod("p0"), pod("p1")]

    result = compare(twins, pods, {"B": ["left", "left"], "A": ["right", "left"]}, PROFILE)

    kinds = result["arms"]["A"]["disagreements"]
    assert kinds["tie"] == 1
    assert result["arms"]["A"]["agree"] == 1
    assert kinds["diverged"] == 0


def test_without_the_reference_arm_parity_is_not_computed() -> None:
    assert "error" in compare(NODES, PODS, {"A": ["small"] * 3}, PROFILE)
