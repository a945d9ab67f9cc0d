"""The comparison finds each kind of disagreement, and nothing when there is none."""

from __future__ import annotations

from typing import Any

from tests.e2e.differential.compare import compare
from tests.e2e.differential.generate import big_cluster, small_case
from tests.e2e.differential.policies import CONFIG
from tests.e2e.differential.schedlog import Cycle
from webhook.policy.dump import snapshot_from_list
from webhook.policy.framework import schedule
from webhook.policy.model import PodView
from webhook.policy.policy_file import load_policy

POLICY = load_policy(CONFIG)


def node(name: str, cpu: str) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def pod(cpu: str = "1", scheduler: str = "default-scheduler") -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        },
    }


NODES = [node("a", "2"), node("b", "4"), node("c", "8")]


def faithful(items: list[dict[str, Any]], target: dict[str, Any]) -> Cycle:
    """What a kube-scheduler that agrees with us would have logged."""
    d = schedule(
        PodView.from_dict(target),
        snapshot_from_list({"items": items}),
        POLICY.profiles[target["spec"]["schedulerName"]],
    )
    if not d.placed:
        return Cycle(error=d.message + " preemption: 0/3 nodes are available: 3 No victims.")
    scores = {
        n: {p: v * d.weights[p] for p, v in s.items() if p != "total"} for n, s in d.scores.items()
    }
    for row in scores.values():
        row["VolumeBinding"] = 0
    totals = {n: s["total"] for n, s in d.scores.items()}
    return Cycle(scores=scores, totals=totals, node=d.node, evaluated=3, feasible=len(scores))


def test_a_faithful_log_agrees() -> None:
    assert compare(NODES, pod(), faithful(NODES, pod()), POLICY).differences == []


def test_a_different_plugin_score_is_reported_with_the_node() -> None:
    theirs = faithful(NODES, pod())
    theirs.scores["b"]["NodeResourcesBalancedAllocation"] += 1
    found = compare(NODES, pod(), theirs, POLICY).differences
    assert found[0].startswith("score NodeResourcesBalancedAllocation on b: kube-scheduler ")


def test_a_choice_outside_our_best_is_reported() -> None:
    theirs = faithful(NODES, pod())
    theirs.node = min(theirs.totals, key=lambda n: theirs.totals[n])
    assert compare(NODES, pod(), theirs, POLICY).differences[-1].startswith("kube-scheduler chose")


def test_a_different_feasible_set_or_verdict_or_message_is_reported() -> None:
    theirs = faithful(NODES, pod("3"))  # fits b and c only
    theirs.scores["a"] = dict(theirs.scores["b"])
    theirs.feasible = 3
    assert (
        "feasible: only kube-scheduler ['a']"
        in compare(NODES, pod("3"), theirs, POLICY).differences[0]
    )
    unplaced = Cycle(error="0/3 nodes are available: 3 Insufficient cpu.")
    assert compare(NODES, pod(), unplaced, POLICY).differences[0].startswith("verdict:")
    huge = faithful(NODES, pod("64"))
    assert compare(NODES, pod("64"), huge, POLICY).differences == []
    huge.error = "0/3 nodes are available: 2 Insufficient cpu."
    assert compare(NODES, pod("64"), huge, POLICY).differences[0].startswith("message:")


def test_cases_are_the_same_for_the_same_seed_and_differ_between_seeds() -> None:
    assert small_case(14, 3).to_dict() == small_case(14, 3).to_dict()
    assert small_case(14, 3).to_dict() != small_case(15, 3).to_dict()
    assert len(big_cluster(14, 120, 10).nodes) == 120
