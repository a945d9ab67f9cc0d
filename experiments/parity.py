"""Policy parity: do the arms choose the same nodes, and why not when they don't. Pure.

With pods arriving one at a time, every arm sees, before pod i, exactly the
cluster its own earlier choices made. Replaying the policy (`schedule`) on
that state, pod by pod, gives two measures per arm:

- policy-optimal: the arm's node has the policy's best score on the arm's
  own state (it is the policy's choice, or ties with it). This does not
  cascade: one early tie broken differently does not count against every
  later pod.
- same node as the reference arm (B, the webhook in nodeName mode), with
  every disagreement explained:

- diverged: an earlier pod already went elsewhere, so the two clusters
  differ; later differences are consequences, not decisions;
- tie: the two nodes have the same policy score; kube-scheduler breaks ties
  at random, the policy by a hash of pod and node names;
- rejected: the arm chose a node the policy's filters reject (reasons given);
- scored lower: the arm preferred a node the policy scores lower (both
  scores given), e.g. kube-scheduler's own score plugins differing from ours.

Ties are broken at random by every arm (kube-scheduler by chance, the webhook
by the admission request uid, the extender by the pod uid), so after the
first tie the clusters usually diverge; the parity scenario is built so that
ties are rare (distinct node sizes, bin-packing scores).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.policy.dump import build_snapshot
from webhook.policy.framework import schedule
from webhook.policy.model import PodView
from webhook.policy.profile import Profile

REFERENCE = "B"


@dataclass(frozen=True)
class Step:
    """The policy's view of one pod on one arm's prior state."""

    choice: str | None
    best: int | None
    """The policy's best total on this state (None: no node fits)."""
    totals: Mapping[str, int]
    reasons: Mapping[str, tuple[str, ...]]


def replay(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    chosen: Sequence[str | None],
    profile: Profile,
    keep: Sequence[set[str]],
) -> list[Step]:
    """For each pod in order: the policy's decision given the earlier pods where `chosen` put them.

    `keep[i]` names the nodes whose scores and reasons are kept for pod i.
    """
    snapshot = build_snapshot(nodes, [])
    steps = []
    for i, (manifest, node) in enumerate(zip(pods, chosen, strict=True)):
        view = PodView.from_dict(_without_uid(manifest))
        decision = schedule(view, snapshot, profile)
        scores = decision.scores
        reasons = decision.node_reasons
        steps.append(
            Step(
                choice=decision.node,
                best=int(decision.best_scores[0][1]["total"]) if decision.best_scores else None,
                totals={n: int(scores[n]["total"]) for n in keep[i] if n in scores},
                reasons={n: tuple(reasons[n]) for n in keep[i] if n in reasons},
            )
        )
        if node:
            snapshot.upsert_pod(PodView.from_dict(_bound(manifest, node, i)))
    return steps


def _without_uid(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = {k: v for k, v in (manifest.get("metadata") or {}).items() if k != "uid"}
    return {**manifest, "metadata": meta}


def _bound(manifest: Mapping[str, Any], node: str, index: int) -> dict[str, Any]:
    meta = {**(manifest.get("metadata") or {}), "uid": f"replay-{index}"}
    spec = {**(manifest.get("spec") or {}), "nodeName": node}
    return {**manifest, "metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def compare(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    placements: Mapping[str, Sequence[str | None]],
    profile: Profile,
    reference: str = REFERENCE,
) -> dict[str, Any]:
    """Agreement of every arm with `reference`, each disagreement explained."""
    if reference not in placements:
        return {"reference": reference, "error": f"arm {reference} did not run"}
    ref = placements[reference]
    out: dict[str, Any] = {"reference": reference, "arms": {}}
    for arm, mine in placements.items():
        keep = [{n for n in (ref[i], mine[i]) if n} for i in range(len(pods))]
        steps = replay(nodes, pods, mine, profile, keep)
        row = _explain(pods, ref, mine, steps, arm, reference) if arm != reference else {}
        out["arms"][arm] = _optimal(mine, steps) | row
    return out


def _optimal(mine: Sequence[str | None], steps: Sequence[Step]) -> dict[str, Any]:
    """How often the arm's node had the policy's best score on the arm's own state."""
    bound = [(n, s) for n, s in zip(mine, steps, strict=True) if n]
    optimal = sum(1 for n, s in bound if s.best is not None and s.totals.get(n) == s.best)
    exact = sum(1 for n, s in bound if n == s.choice)
    return {
        "bound": len(bound),
        "policyOptimal": optimal,
        "policyChoice": exact,
        "policyOptimalRate": round(optimal / len(bound), 4) if bound else None,
    }


def _explain(
    pods: Sequence[Mapping[str, Any]],
    ref: Sequence[str | None],
    mine: Sequence[str | None],
    steps: Sequence[Step],
    arm: str,
    reference: str,
) -> dict[str, Any]:
    compared = agree = 0
    kinds = {"diverged": 0, "tie": 0, "rejected": 0, "scoredLower": 0}
    details: list[dict[str, Any]] = []
    same_so_far = True
    for i, pod in enumerate(pods):
        x, y = ref[i], mine[i]
        if x and y:
            compared += 1
            if x == y:
                agree += 1
            else:
                kind, why = _why(steps[i], x, y, arm, reference, same_so_far)
                kinds[kind] += 1
                details.append({"pod": pod["metadata"]["name"], reference: x, arm: y,
                                "kind": kind, "reason": why})  # fmt: skip
        if x != y:
            same_so_far = False
    return {
        "compared": compared,
        "agree": agree,
        "agreement": round(agree / compared, 4) if compared else None,
        "disagreements": kinds,
        "details": details,
    }


def _why(step: Step, x: str, y: str, arm: str, reference: str, same_state: bool) -> tuple[str, str]:
    if not same_state:
        return "diverged", "an earlier pod was already placed differently (states diverged)"
    if y in step.reasons:
        return (
            "rejected",
            f"{arm} chose {y}, which the policy rejects: {', '.join(step.reasons[y])}",
        )
    tx, ty = step.totals.get(x), step.totals.get(y)
    if tx is not None and tx == ty:
        return "tie", f"{x} and {y} tie at policy score {tx}"
    return "scoredLower", (
        f"{arm} chose {y} (policy score {ty}) where {reference} chose {x} (score {tx}); "
        f"the policy's choice on this state is {step.choice}"
    )
