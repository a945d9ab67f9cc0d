"""NodeResourcesBalancedAllocation, table-driven from the Kubernetes v1.37 formula.

balancedResourceScorer (noderesources/balanced_allocation.go):
    balance(f) = int((1 - std(f)) * 100), fractions capped at 1,
    std = |f1 - f2| / 2 for two fractions, the population std for more, 0 for one;
    score = 50 + (50 + balance(with pod) - balance(without pod)) / 2, Go integer division.
Each case's comment is the arithmetic that gives its expected score.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from policy_builders import make_node, make_pod, only, place, plugin_args, snapshot

NAME = "NodeResourcesBalancedAllocation"
CPU_MEM_EPHEMERAL = plugin_args(
    NAME, "resources: [{name: cpu, weight: 1}, {name: memory, weight: 1},"
    " {name: ephemeral-storage, weight: 1}]",
)  # fmt: skip
CPU_MEM_GPU = plugin_args(
    NAME, "resources: [{name: cpu, weight: 1}, {name: memory, weight: 1},"
    " {name: example.com/gpu, weight: 1}]",
)  # fmt: skip


@dataclass(frozen=True)
class Case:
    name: str
    node: dict[str, Any]
    pod: dict[str, str]
    expected: int
    existing: dict[str, str] = field(default_factory=dict)
    args: str = ""


CASES = [
    Case("an empty node stays balanced",
         {"cpu": "4", "memory": "8Gi"}, {"cpu": "1", "memory": "2Gi"},
         # with .25/.25 -> 100, without 0/0 -> 100: 50 + (50 + 0) / 2
         75),
    Case("a pod that evens the node out scores high",
         {"cpu": "4", "memory": "4Gi"}, {"memory": "2Gi"},
         # with .5/.5 -> 100, without .5/0 -> std .25 -> 75: 50 + (50 + 25) / 2 = 50 + 37
         87, existing={"cpu": "2"}),
    Case("a pod that unbalances an empty node scores low",
         {"cpu": "4", "memory": "4Gi"}, {"cpu": "2"},
         # with .5/0 -> 75, without 100: 50 + (50 - 25) / 2 = 50 + 12
         62),
    Case("an unchanged imbalance scores the middle",
         {"cpu": "4", "memory": "4Gi"}, {"cpu": "1", "memory": "1Gi"},
         # with .75/.25 -> 75, without .5/0 -> 75: 50 + 50 / 2
         75, existing={"cpu": "2"}),
    Case("fractions are capped at one",
         {"cpu": "1", "memory": "1Gi"}, {"memory": "512Mi"},
         # cpu 2/1 capped to 1; with 1/.5 -> 75, without 1/0 -> 50: 50 + (50 + 25) / 2
         87, existing={"cpu": "2"}),
    Case("a wider node spreads less",
         {"cpu": "4", "memory": "16Gi"}, {"cpu": "2", "memory": "2Gi"},
         # with .5/.125 -> std .1875 -> 81, without 100: 50 + (50 - 19) / 2 = 50 + 15
         65),
    Case("a resource the node has none of takes no part",
         {"cpu": "4", "memory": "0"}, {"cpu": "1"},
         # only cpu has allocatable: one fraction, std 0, both 100: 50 + 50 / 2
         75),
    Case("three resources use the population std",
         {"cpu": "4", "memory": "4Gi", "ephemeral-storage": "4Gi"}, {"cpu": "1", "memory": "1Gi"},
         # with .25/.25/0: mean 1/6, var (2 (1/12)^2 + (1/6)^2) / 3 = 1/72, std .1179 -> 88;
         # without 0/0/0 -> 100: 50 + (50 - 12) / 2 = 50 + 19
         69, args=CPU_MEM_EPHEMERAL),
    Case("an extended resource the pod does not request is left out",
         {"cpu": "4", "memory": "8Gi", "example.com/gpu": "4"}, {"cpu": "2"},
         # gpu skipped: with .5/0 -> 75, without 100: 50 + (50 - 25) / 2
         62, args=CPU_MEM_GPU),
    Case("an extended resource the pod requests counts",
         {"cpu": "4", "memory": "8Gi", "example.com/gpu": "4"},
         {"cpu": "1", "example.com/gpu": "1"},
         # with .25/0/.25 -> std .1179 -> 88, without 100: 50 + (50 - 12) / 2
         69, args=CPU_MEM_GPU),
]  # fmt: skip


def _profile(args: str) -> Any:
    return only("NodeResourcesFit", scores={NAME: 1}, args=args)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_balanced_allocation_scores_the_change_in_balance(case: Case) -> None:
    extra = {k: v for k, v in case.node.items() if k not in ("cpu", "memory")}
    node = make_node("n", case.node["cpu"], case.node["memory"], extra=extra)
    existing = []
    if case.existing:
        existing = [make_pod("e", node="n", requests=case.existing)]
    pod = make_pod("p", requests=case.pod)

    decision = place(pod, snapshot([node], existing), _profile(case.args))

    assert decision.scores["n"][NAME] == case.expected


def test_balanced_allocation_skips_best_effort_pods() -> None:
    decision = place(make_pod("p"), snapshot([make_node("a")]), _profile(""))
    assert NAME not in decision.scores["a"]


def test_balanced_allocation_is_not_normalized_across_nodes() -> None:
    nodes = [make_node("a", "4", "4Gi"), make_node("b", "4", "16Gi")]
    decision = place(make_pod("p", "2", "2Gi"), snapshot(nodes), _profile(""))
    assert {n: s[NAME] for n, s in decision.scores.items()} == {"a": 75, "b": 65}
