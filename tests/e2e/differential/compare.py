"""The policy's answer for a case, set against kube-scheduler's. Pure: no cluster.

Compared, for every case:

- the verdict (placed or not) and, when not placed, the FitError message
  word for word (without kube-scheduler's "preemption: ..." suffix);
- the feasible set: the nodes kube-scheduler scored (or bound to, when only
  one was feasible and it skipped scoring) against the nodes our filters pass;
- every plugin's weighted score and the total on every scored node (a plugin
  one side skips counts as 0; VolumeBinding and DynamicResources, which the
  policy does not model, must score 0);
- that kube-scheduler's choice is among our best-scored nodes (it breaks ties
  at random, we by hash, so the node itself may differ on a tie).

percentageOfNodesToScore: when kube-scheduler stops at numFeasibleNodesToFind
feasible nodes, which ones it scored depends on where its scan started, and
that start rotates from cycle to cycle (nextStartNodeIndex advances by the
nodes each cycle processed) over its node tree order (zones interleaved). The
policy scans in name order from a hash of the pod instead, so the two samples
differ. Compared then: the number of nodes scored (the same formula), that
every node it scored is feasible for us, and the scores and choice *on its
sample* (the policy's scorers run over exactly those nodes). How often the
policy's own sample would have led to another node is counted, not asserted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tests.e2e.differential.schedlog import Cycle
from webhook.policy.dump import snapshot_from_list
from webhook.policy.framework import num_feasible_nodes_to_find, schedule, score_nodes
from webhook.policy.interface import CycleState
from webhook.policy.model import PodView
from webhook.policy.policy_file import Policy
from webhook.policy.snapshot import ClusterSnapshot

UNMODELED_SCORES = frozenset({"VolumeBinding", "DynamicResources"})
MAX_DIFFERENCES = 25


@dataclass
class Comparison:
    differences: list[str] = field(default_factory=list)
    sampled: bool = False
    """kube-scheduler scored only a sample of the feasible nodes."""
    same_node_with_own_sample: bool | None = None
    """For sampled cases: did the policy, scanning on its own, pick kube-scheduler's node?"""

    def add(self, text: str) -> None:
        if len(self.differences) < MAX_DIFFERENCES:
            self.differences.append(text)

    @property
    def agrees(self) -> bool:
        return not self.differences


def _weighted(
    scores: Mapping[str, Mapping[str, int]], weights: Mapping[str, int]
) -> dict[str, dict[str, int]]:
    return {
        node: {p: v * weights[p] for p, v in row.items() if p != "total"} | {"total": row["total"]}
        for node, row in scores.items()
    }


def _scores_on(
    pod: PodView, snapshot: ClusterSnapshot, profile: Any, nodes: Sequence[str]
) -> dict[str, dict[str, int]]:
    """Our weighted scores when exactly `nodes` are the feasible nodes scored."""
    state = CycleState(pod=pod, snapshot=snapshot, slots=snapshot.sorted_slots())
    slots = np.array([snapshot.slot_of(n) for n in nodes], dtype=np.int64)
    per_plugin, total = score_nodes(state, profile, slots)
    weights = {p.name: w for p, w in profile.scorers}
    out: dict[str, dict[str, int]] = {n: {"total": int(total[i])} for i, n in enumerate(nodes)}
    for name, values in per_plugin:
        for i, n in enumerate(nodes):
            out[n][name] = int(values[i]) * weights[name]
    return out


def compare(
    items: Sequence[Mapping[str, Any]], pod_obj: Mapping[str, Any], theirs: Cycle, policy: Policy
) -> Comparison:
    """Set kube-scheduler's `theirs` against the policy on the same API objects."""
    out = Comparison()
    snapshot = snapshot_from_list({"items": list(items)})
    pod = PodView.from_dict(pod_obj)
    profile = policy.profile_for(pod.scheduler_name)
    if profile is None:
        out.add(f"no profile {pod.scheduler_name!r} in the policy")
        return out
    full = schedule(pod, snapshot, replace(profile, percentage_of_nodes_to_score=100))
    if theirs.hint is not None and theirs.hint == theirs.node and not theirs.scores:
        out.add(f"kube-scheduler took a batching hint, {theirs.hint}: no cycle to compare")

    if theirs.error is not None:
        if full.placed:
            out.add(
                f"verdict: kube-scheduler did not place the pod ({theirs.message}); "
                f"ours placed it on {full.node}"
            )
        elif full.message != theirs.message:
            out.add(f"message: kube-scheduler {theirs.message!r}; ours {full.message!r}")
        return out
    if not full.placed:
        out.add(f"verdict: kube-scheduler bound the pod to {theirs.node}; ours: {full.message}")
        return out

    feasible = set(full.feasible_nodes)
    to_find = num_feasible_nodes_to_find(profile.percentage_of_nodes_to_score, len(snapshot))
    out.sampled = to_find < len(feasible)
    scored = set(theirs.scores) if theirs.scores else {str(theirs.node)}
    if len(scored) != theirs.feasible:
        out.add(
            f"kube-scheduler logged scores for {len(scored)} nodes, feasibleNodes={theirs.feasible}"
        )
    if out.sampled:
        if theirs.feasible != to_find:
            out.add(
                f"kube-scheduler scored {theirs.feasible} nodes; numFeasibleNodesToFind: {to_find}"
            )
        if not scored <= feasible:
            out.add(f"kube-scheduler scored nodes our filters reject: {sorted(scored - feasible)}")
            return out
    elif scored != feasible:
        out.add(
            f"feasible: only kube-scheduler {sorted(scored - feasible)}, "
            f"only ours {sorted(feasible - scored)}"
        )
        return out
    if not theirs.scores:  # one feasible node: kube-scheduler binds without scoring
        if theirs.node not in feasible:
            out.add(f"kube-scheduler bound to {theirs.node}, which our filters reject")
        return out

    if out.sampled:
        ours = _scores_on(pod, snapshot, profile, sorted(scored))
        own = schedule(pod, snapshot, profile)
        out.same_node_with_own_sample = own.node == theirs.node
    else:
        ours = _weighted(full.scores, full.weights)
    for node in sorted(scored):
        mine, kube = ours[node], theirs.scores[node]
        for plugin in sorted((set(mine) | set(kube)) - {"total"}):
            if plugin in UNMODELED_SCORES and plugin not in mine:
                if kube[plugin] != 0:
                    out.add(f"{plugin} (not modeled) scored {kube[plugin]} on {node}")
                continue
            if mine.get(plugin, 0) != kube.get(plugin, 0):
                out.add(
                    f"score {plugin} on {node}: kube-scheduler {kube.get(plugin, 0)}, "
                    f"ours {mine.get(plugin, 0)}"
                )
        if theirs.totals.get(node) != mine["total"]:
            out.add(
                f"total on {node}: kube-scheduler {theirs.totals.get(node)}, ours {mine['total']}"
            )
    best = max(ours[n]["total"] for n in scored)
    tops = sorted(n for n in scored if ours[n]["total"] == best)
    if theirs.node not in tops:
        out.add(
            f"kube-scheduler chose {theirs.node} (our total {ours[str(theirs.node)]['total']}); "
            f"our best ({best}): {tops}"
        )
    return out
