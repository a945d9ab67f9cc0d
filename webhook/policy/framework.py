"""schedule(): one kube-scheduler scheduling cycle, vectorised over nodes.

Steps, as in kube-scheduler's schedulePod / findNodesThatFitPod:

1. Pods the policy cannot evaluate (see PodView.skip_reason) get Code.Skip.
2. Pre-filters may restrict the nodes (NodeAffinity on metadata.name) or
   reject the pod outright.
3. Every filter runs over all candidate nodes at once (numpy); a node's
   verdict comes from the *first* failing filter in profile order, as
   kube-scheduler stops at the first failing plugin.
4. percentageOfNodesToScore: the scan visits nodes in node-name order
   starting at a deterministic offset (hash of the pod) and stops once it has
   found numFeasibleNodesToFind feasible nodes (adaptive default: 50% minus
   1% per 125 nodes, at least 5%, at least 100 nodes). The filters of step 3
   have judged every node, but the verdicts of the nodes after the stop are
   dropped: they are neither feasible nor counted among the rejections, so
   the result is the one kube-scheduler's stopped scan gives.
5. Scores: each score plugin scores the feasible nodes, normalises to
   0..100; total = sum(weight * normalised score).
6. Tie-break (deterministic, no randomness; kube-scheduler picks uniformly at
   random): among the nodes with the highest total, the node whose
   splitmix64(blake2b64(node name) XOR blake2b64(pod key)) is smallest, where
   the pod key is `seed` if given, else the pod uid, else namespace/name.
   Different pods therefore spread over tied nodes, and the same pod always
   lands on the same node for the same snapshot.

The unschedulable message is kube-scheduler's FitError.Error():
"0/N nodes are available: <count> <reason>, ...." with the histogram lines
sorted as strings.

A Decision is plain, immutable data: it keeps what it needs to answer for
every node (slot numbers, an immutable slot-to-name table, status indexes,
score arrays) and nothing that reads the live snapshot, so it stays true
after the caller lets go of the snapshot's lock. The per-node mappings
(`node_reasons`, `scores`) are built from that data when asked for: the
admission path reads only the histogram and the best few nodes.

Deliberate differences from kube-scheduler (see also the plugin modules):
no nominated pods or preemption; when only one node is feasible its scores are still computed
(kube-scheduler skips scoring) so that `explain` can show them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from webhook.policy.arrays import member_mask
from webhook.policy.interface import CycleState, FilterResult, IntArray, SlotArray
from webhook.policy.model import PodView
from webhook.policy.profile import Profile
from webhook.policy.snapshot import ClusterSnapshot
from webhook.policy.status import Code, Status

__all__ = [
    "Decision",
    "PreFiltered",
    "num_feasible_nodes_to_find",
    "run_filters",
    "run_pre_filters",
    "schedule",
    "score_nodes",
    "tie_break",
]

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
BASE_PERCENTAGE_OF_NODES_TO_SCORE = 50
NO_NODES_MESSAGE = "no nodes available to schedule pods"
TOP_SCORED = 5
#: Nodes judged beyond percentageOfNodesToScore's count in the first filter pass, so that
#: a few rejected nodes in the prefix do not cost a second pass.
SCAN_MARGIN = 16


A = TypeVar("A", bound=npt.NDArray[Any])


def _frozen(array: A) -> A:
    """`array`, made read-only (a Decision's arrays are its own and never change)."""
    array.flags.writeable = False
    return array


_NO_SLOTS: SlotArray = _frozen(np.zeros(0, dtype=np.int64))
_NO_STATUS_INDEX: npt.NDArray[np.int32] = _frozen(np.zeros(0, dtype=np.int32))


@dataclass(frozen=True, eq=False)
class Rejections:
    """Which node each filter status rejected, as slot numbers into an immutable name table."""

    names: tuple[str, ...]
    """The snapshot's slot-to-name table at decision time (it is replaced, never changed)."""
    slots: SlotArray
    """Rejected nodes among those evaluated."""
    status_index: npt.NDArray[np.int32]
    """Per rejected node: its status in `statuses` (from the first failing filter)."""
    statuses: tuple[Status, ...]
    outside: SlotArray
    """Nodes a pre-filter left out of the cycle; they all carry `outside_status`."""
    outside_status: Status | None

    def per_node(self) -> dict[str, Status]:
        out = {
            self.names[s]: self.statuses[i]
            for s, i in zip(self.slots.tolist(), self.status_index.tolist(), strict=True)
        }
        if self.outside_status is not None:
            for s in self.outside.tolist():
                out[self.names[s]] = self.outside_status
        return out


@dataclass(frozen=True, eq=False)
class ScoreTable:
    """Normalised scores of the scored nodes, one array per plugin, and the weighted totals.

    The scored nodes are kept as slots into the immutable slot-to-name table: their
    names are looked up only when asked for (the admission path needs only their count
    and the best few)."""

    names: tuple[str, ...]
    """The snapshot's slot-to-name table at decision time."""
    slots: SlotArray
    """The scored nodes, in scan order."""
    per_plugin: tuple[tuple[str, IntArray], ...]
    totals: IntArray

    @property
    def nodes(self) -> tuple[str, ...]:
        names = self.names
        return tuple(names[s] for s in self.slots.tolist())

    def rows(self) -> dict[str, Mapping[str, int]]:
        out: dict[str, Mapping[str, int]] = {}
        cols = [(name, arr.tolist()) for name, arr in self.per_plugin]
        tot = self.totals.tolist()
        for i, node in enumerate(self.nodes):
            row = {name: vals[i] for name, vals in cols}
            row["total"] = tot[i]
            out[node] = row
        return out


_NO_REJECTIONS = Rejections((), _NO_SLOTS, _NO_STATUS_INDEX, (), _NO_SLOTS, None)
_NO_SCORES = ScoreTable((), _NO_SLOTS, (), _NO_SLOTS)


@dataclass(frozen=True)
class Decision:
    node: str | None
    code: Code
    message: str = ""
    reason_counts: Mapping[str, int] = field(default_factory=dict)
    """Histogram of rejection reasons over evaluated nodes (FitError's)."""
    evaluated_nodes: int = 0
    total_nodes: int = 0
    weights: Mapping[str, int] = field(default_factory=dict)
    """Score plugin -> weight used for "total"."""
    best_scores: tuple[tuple[str, Mapping[str, int]], ...] = ()
    """The TOP_SCORED best nodes with their scores, best first (built eagerly and
    cheaply, so callers that only need the best few never build `scores`)."""
    rejections: Rejections = field(default=_NO_REJECTIONS, repr=False)
    score_table: ScoreTable = field(default=_NO_SCORES, repr=False)

    @property
    def feasible_count(self) -> int:
        """How many feasible nodes the scan found (the ones scored)."""
        return len(self.score_table.slots)

    @property
    def feasible_nodes(self) -> tuple[str, ...]:
        """Feasible nodes found by the scan (the ones scored), in scan order (built on
        each call)."""
        return self.score_table.nodes

    @property
    def placed(self) -> bool:
        return self.code is Code.Success and self.node is not None

    @property
    def node_reasons(self) -> dict[str, tuple[str, ...]]:
        """Rejected node -> reasons from the first failing filter (built on each call)."""
        return {n: s.reasons for n, s in self.rejections.per_node().items()}

    @property
    def node_plugins(self) -> dict[str, str]:
        """Rejected node -> name of the filter plugin that rejected it (built on each call)."""
        return {n: s.plugin for n, s in self.rejections.per_node().items()}

    @property
    def scores(self) -> dict[str, Mapping[str, int]]:
        """Scored node -> {plugin: normalised score 0..100 (unweighted), "total": weighted
        sum} (built on each call)."""
        return self.score_table.rows()


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or 0
    if pct >= 100:
        return num_all_nodes
    if pct <= 0:
        pct = BASE_PERCENTAGE_OF_NODES_TO_SCORE - num_all_nodes // 125
        if pct < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            pct = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    n = num_all_nodes * pct // 100
    return max(n, MIN_FEASIBLE_NODES_TO_FIND)


def fit_error_message(
    num_all_nodes: int, counts: Mapping[str, int], prefilter_msg: str = ""
) -> str:
    msg = f"0/{num_all_nodes} nodes are available:"
    if prefilter_msg:
        return f"{msg} {prefilter_msg}."
    lines = sorted(f"{v} {k}" for k, v in counts.items())
    if lines:
        msg += f" {', '.join(lines)}."
    return msg


_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _splitmix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * _MIX1
        x = x ^ (x >> np.uint64(27))
        x = x * _MIX2
        return x ^ (x >> np.uint64(31))


def tie_break(snapshot: ClusterSnapshot, slots: SlotArray, pod_hash: int) -> int:
    """Index into `slots` (equally good nodes) of the one to pick (step 6 above)."""
    return int(np.argmin(_splitmix(snapshot.name_hash[slots] ^ np.uint64(pod_hash))))


def score_nodes(
    state: CycleState, profile: Profile, fslots: SlotArray
) -> tuple[list[tuple[str, IntArray]], IntArray]:
    """Step 5 for the feasible nodes `fslots`: each plugin's normalised scores, and the
    weighted totals. Plugins with nothing to say (Skip) are left out.

    Scores depend on which nodes are scored (normalisation, spreading domains),
    so a caller replaying another scheduler's sample passes that sample.
    """
    total = np.zeros(len(fslots), dtype=np.int64)
    per_plugin: list[tuple[str, IntArray]] = []
    for scorer, weight in profile.scorers:
        raw = scorer.score(state, fslots)
        if raw is None:
            continue
        norm = scorer.normalize(state, raw)
        if len(norm) and (int(norm.min()) < 0 or int(norm.max()) > 100):
            raise ValueError(f"plugin {scorer.name} returned a score outside 0..100")
        per_plugin.append((scorer.name, norm))
        total += weight * norm
    return per_plugin, total


@dataclass(frozen=True, eq=False)
class PreFiltered:
    """What the pre-filters left: the cycle's nodes, or a rejection of the pod."""

    slots: SlotArray
    """The nodes taking part (all of them unless a pre-filter narrowed them)."""
    outside_status: Status | None = None
    """The status of the nodes a pre-filter left out (None when none was)."""
    rejection: Status | None = None
    """Set when a pre-filter rejected the pod outright (then no node takes part)."""


def run_pre_filters(
    pod: PodView, snapshot: ClusterSnapshot, profile: Profile, slots: SlotArray
) -> PreFiltered:
    """Step 2 over `slots`: the profile's pre-filters, in order; the first rejection wins."""
    outside: Status | None = None
    for plugin in profile.pre_filters:
        res = plugin.pre_filter(pod, snapshot)
        if res is None:
            continue
        if res.status is not None:
            return PreFiltered(slots[:0], rejection=res.status)
        if res.node_names is not None:
            wanted = [s for nm in res.node_names if (s := snapshot.slot_of(nm)) is not None]
            slots = slots[member_mask(slots, wanted)]
            outside = Status(
                Code.UnschedulableAndUnresolvable,
                (f"node(s) didn't satisfy plugin(s) [{plugin.name}]",),
                plugin.name,
            )
    return PreFiltered(slots, outside)


def run_filters(state: CycleState, profile: Profile) -> tuple[npt.NDArray[np.int32], list[Status]]:
    """Step 3: per node of `state.slots`, -1 when it passes every filter, else the index
    in the returned statuses of the first failing filter's status."""
    first = np.full(len(state.slots), -1, dtype=np.int32)
    statuses: list[Status] = []
    for plugin in profile.filters:
        fres: FilterResult | None = plugin.filter(state)
        if fres is None:
            continue
        new = (first < 0) & (fres.status_index >= 0)
        if new.any():
            first[new] = fres.status_index[new] + len(statuses)
        statuses.extend(fres.statuses)
    return first, statuses


def _filter_scan(
    state: CycleState, profile: Profile, to_find: int
) -> tuple[npt.NDArray[np.int32], list[Status]]:
    """Step 3 over the nodes of `state.slots` (in scan order), first over a prefix a little
    longer than `to_find` (when that is at most half of them: large clusters, where
    percentageOfNodesToScore is small). When that prefix holds `to_find` feasible nodes,
    the scan stops inside it and the nodes after it are never judged; otherwise the rest
    is judged too.
    A node's verdict does not depend on which other nodes are judged with it, so the
    result is the one judging every node gives, cut at the scan's stop. Returns
    run_filters' answer for the judged prefix of the scan."""
    scan = state.slots
    n = len(scan)
    prefix = to_find + to_find // 4 + SCAN_MARGIN
    if to_find <= 0 or 2 * prefix > n:  # a second pass would cost more than it saves
        return run_filters(state, profile)
    state.narrow(scan[:prefix])
    first, statuses = run_filters(state, profile)
    if int(np.count_nonzero(first < 0)) >= to_find:
        return first, statuses
    state.narrow(scan[prefix:])
    rest, more = run_filters(state, profile)
    state.narrow(scan)
    rest = np.where(rest >= 0, rest + len(statuses), rest).astype(np.int32)
    return np.concatenate((first, rest)), statuses + more


def schedule(
    pod: PodView, snapshot: ClusterSnapshot, profile: Profile, *, seed: str | None = None
) -> Decision:
    """Pick a node for `pod`. Never raises: internal failures give Code.Error."""
    if pod.skip_reason is not None:
        return Decision(
            node=None, code=Code.Skip, message=pod.skip_reason, total_nodes=len(snapshot)
        )
    try:
        return _schedule(pod, snapshot, profile, seed)
    except Exception as exc:  # pragma: no cover - defensive: a bug must not block admission
        return Decision(
            node=None,
            code=Code.Error,
            message=f"internal error in placement policy: {type(exc).__name__}: {exc}",
            total_nodes=len(snapshot),
        )


def _schedule(
    pod: PodView, snapshot: ClusterSnapshot, profile: Profile, seed: str | None
) -> Decision:
    all_slots = snapshot.sorted_slots()
    n_all = len(all_slots)
    if n_all == 0:
        return Decision(node=None, code=Code.Unschedulable, message=NO_NODES_MESSAGE)

    # ---- pre-filter: may narrow the node set or reject the pod
    pre = run_pre_filters(pod, snapshot, profile, all_slots)
    if pre.rejection is not None:
        msg = pre.rejection.message
        return Decision(
            node=None,
            code=pre.rejection.code,
            message=fit_error_message(n_all, {}, msg),
            reason_counts={msg: n_all},
            evaluated_nodes=0,
            total_nodes=n_all,
        )
    slots = pre.slots
    n = len(slots)

    # ---- scan order (a rotation of the name order) and percentageOfNodesToScore
    to_find = num_feasible_nodes_to_find(profile.percentage_of_nodes_to_score, n)
    state = CycleState(pod, snapshot, slots, seed=seed)
    start = state.pod_hash() % n if n else 0
    scan = np.concatenate((slots[start:], slots[:start]))
    state.narrow(scan)

    # ---- filters: first failing plugin decides the node's status
    first, statuses = _filter_scan(state, profile, to_find)
    feasible = first < 0
    cum = np.cumsum(feasible)
    total_feasible = int(cum[-1]) if len(cum) else 0
    if total_feasible >= to_find and to_find > 0:
        evaluated = int(np.searchsorted(cum, to_find)) + 1
    else:
        evaluated = len(first)
    chosen_pos = np.flatnonzero(feasible[:evaluated])
    rejected_pos = np.flatnonzero(~feasible[:evaluated])

    # reasons histogram over evaluated, rejected nodes (+ nodes the pre-filters left out)
    status_of_rejected = first[rejected_pos]
    counts: dict[str, int] = {}
    if len(status_of_rejected):
        per_status = np.bincount(status_of_rejected, minlength=len(statuses))
        for si, c in enumerate(per_status.tolist()):
            if c:
                for r in statuses[si].reasons:
                    counts[r] = counts.get(r, 0) + c
    outside_status = pre.outside_status
    n_outside = n_all - n if outside_status is not None else 0
    if outside_status is not None and n_outside:
        for r in outside_status.reasons:
            counts[r] = counts.get(r, 0) + n_outside
    rejections = Rejections(
        names=snapshot.slot_names(),
        slots=_frozen(scan[rejected_pos]),
        status_index=_frozen(status_of_rejected),
        statuses=tuple(statuses),
        outside=(
            _frozen(all_slots[~member_mask(all_slots, slots.tolist())]) if n_outside else _NO_SLOTS
        ),
        outside_status=outside_status if n_outside else None,
    )

    weights = {p.name: w for p, w in profile.scorers}
    evaluated_total = evaluated + n_outside
    if len(chosen_pos) == 0:
        codes = {statuses[int(i)].code for i in np.unique(status_of_rejected).tolist()}
        if outside_status is not None and n_outside:
            codes.add(outside_status.code)
        code = (
            Code.Unschedulable if Code.Unschedulable in codes else Code.UnschedulableAndUnresolvable
        )
        return Decision(
            node=None,
            code=code,
            message=fit_error_message(n_all, counts),
            reason_counts=counts,
            evaluated_nodes=evaluated_total,
            total_nodes=n_all,
            weights=weights,
            rejections=rejections,
        )

    # ---- scores over the feasible nodes found
    fslots: SlotArray = scan[chosen_pos]
    per_plugin, total = score_nodes(state, profile, fslots)

    best = int(total.max())
    ties = np.flatnonzero(total == best)
    if len(ties) == 1:
        pick = int(ties[0])
    else:
        pick = int(ties[tie_break(snapshot, fslots[ties], state.pod_hash())])
    node = snapshot.name_at(int(fslots[pick]))

    names = snapshot.slot_names()
    best_scores = tuple(
        (
            names[int(fslots[i])],
            {**{name: int(arr[i]) for name, arr in per_plugin}, "total": int(total[i])},
        )
        for i in _top(total, TOP_SCORED)
    )
    return Decision(
        node=node,
        code=Code.Success,
        message=(
            f"placed on {node}: {len(fslots)} feasible of {evaluated_total} evaluated nodes "
            f"({n_all} in cluster), score {best}"
        ),
        reason_counts=counts,
        best_scores=best_scores,
        evaluated_nodes=evaluated_total,
        total_nodes=n_all,
        weights=weights,
        rejections=rejections,
        score_table=ScoreTable(
            names,
            _frozen(fslots),
            tuple((name, _frozen(arr)) for name, arr in per_plugin),
            _frozen(total),
        ),
    )


def _top(total: IntArray, k: int) -> list[int]:
    """Indexes of the k highest totals, highest first, ties in scan order (what a stable
    sort of all of them gives, without sorting all of them)."""
    if len(total) <= k:
        return [int(i) for i in np.argsort(-total, kind="stable")]
    kth = np.partition(total, len(total) - k)[len(total) - k]
    candidates = np.flatnonzero(total >= kth)
    order = np.argsort(-total[candidates], kind="stable")[:k]
    return [int(i) for i in candidates[order]]
