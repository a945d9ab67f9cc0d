"""The policy's answer for exactly the nodes kube-scheduler asks about. Pure.

kube-scheduler calls an extender with the nodes that passed its own filters
(and, with percentageOfNodesToScore, only the first feasible ones it found),
then prioritizes the nodes that passed every filter. So unlike `schedule`,
which scans the whole snapshot, these functions evaluate a given subset: the
policy's filters and scorers are vectorised over `CycleState.slots`, and count
existing pods over the whole snapshot, so a subset needs no other change.
Nothing here samples nodes: the scheduler already did.

Scores leave the policy as weighted totals and must reach kube-scheduler as
integers in 0..10 (MaxExtenderPriority), which it multiplies by the
extender's weight and by 10. Eleven levels lose most of the policy's ordering,
and kube-scheduler breaks ties at random, so two modes:

- `linear`: total scaled to 0..10 (floor), the plain reading of the contract;
- `decisive`: the node the policy itself would pick among these (highest
  total, the policy's deterministic tie-break) gets 10, every other node its
  linear score capped at 9. With kube-scheduler's own score plugins disabled
  the scheduler then binds exactly the policy's choice; with them enabled, the
  extender's weight sets how much that choice counts.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from webhook.policy.framework import run_filters, run_pre_filters, tie_break
from webhook.policy.interface import CycleState
from webhook.policy.model import PodView
from webhook.policy.profile import Profile
from webhook.policy.snapshot import ClusterSnapshot
from webhook.policy.status import Code, Status

MAX_PRIORITY = 10
UNKNOWN_NODE = "node(s) were not yet in the placement-webhook extender's cache"


class Scoring(enum.Enum):
    DECISIVE = "decisive"
    LINEAR = "linear"


@dataclass(frozen=True)
class FilterVerdict:
    """Which of the asked nodes pass, and why the others do not."""

    passed: tuple[str, ...]
    failed: Mapping[str, str] = field(default_factory=dict)
    """Node -> message; kube-scheduler may retry (Unschedulable)."""
    unresolvable: Mapping[str, str] = field(default_factory=dict)
    """Node -> message; preemption would not help (UnschedulableAndUnresolvable)."""


@dataclass(frozen=True)
class Priorities:
    """Per asked node, in request order: the policy total and the wire score."""

    hosts: tuple[tuple[str, int], ...]
    totals: Mapping[str, int] = field(default_factory=dict)
    choice: str | None = None
    """The node the policy prefers among those asked (None when none is known)."""


def _known(snapshot: ClusterSnapshot, names: Sequence[str]) -> tuple[list[str], list[int]]:
    known_names: list[str] = []
    slots: list[int] = []
    for name in names:
        slot = snapshot.slot_of(name)
        if slot is not None:
            known_names.append(name)
            slots.append(slot)
    return known_names, slots


def _state(pod: PodView, snapshot: ClusterSnapshot, slots: Sequence[int]) -> CycleState:
    """A cycle over `slots`, tie-broken by the pod's uid.

    Admission breaks ties with the request uid (pods of a ReplicaSet have no
    name yet); the pod uid plays that part here: different pods spread over
    tied nodes, and kube-scheduler's retries of one pod get the same answer.
    """
    return CycleState(pod, snapshot, np.asarray(slots, dtype=np.int64), seed=pod.uid or pod.key)


def _record(status: Status, name: str, verdict: dict[str, dict[str, str]]) -> None:
    bucket = "unresolvable" if status.code is Code.UnschedulableAndUnresolvable else "failed"
    verdict[bucket][name] = status.message


def filter_nodes(
    pod: PodView, snapshot: ClusterSnapshot, profile: Profile, names: Sequence[str]
) -> FilterVerdict:
    """Run the profile's pre-filters and filters over `names`, in request order."""
    out: dict[str, dict[str, str]] = {"failed": {}, "unresolvable": {}}
    known_names, slots = _known(snapshot, names)
    for name in set(names) - set(known_names):
        out["failed"][name] = UNKNOWN_NODE
    pre = run_pre_filters(pod, snapshot, profile, np.asarray(slots, dtype=np.int64))
    if pre.rejection is not None:
        for name in known_names:
            _record(pre.rejection, name, out)
        return FilterVerdict((), out["failed"], out["unresolvable"])
    if pre.outside_status is not None:
        kept = set(pre.slots.tolist())
        for name, slot in zip(known_names, slots, strict=True):
            if slot not in kept:
                _record(pre.outside_status, name, out)
        known_names = [n for n, s in zip(known_names, slots, strict=True) if s in kept]
        slots = [s for s in slots if s in kept]
    first, statuses = run_filters(_state(pod, snapshot, slots), profile)
    passed = []
    for name, index in zip(known_names, first.tolist(), strict=True):
        if index < 0:
            passed.append(name)
        else:
            _record(statuses[index], name, out)
    return FilterVerdict(tuple(passed), out["failed"], out["unresolvable"])


def prioritize_nodes(
    pod: PodView,
    snapshot: ClusterSnapshot,
    profile: Profile,
    names: Sequence[str],
    scoring: Scoring = Scoring.DECISIVE,
) -> Priorities:
    """Score `names` with the profile's scorers; unknown nodes score 0."""
    known_names, slots = _known(snapshot, names)
    if not slots:
        return Priorities(tuple((n, 0) for n in names))
    state = _state(pod, snapshot, slots)
    slot_array = state.slots
    total = np.zeros(len(slot_array), dtype=np.int64)
    weight_sum = 0
    for scorer, weight in profile.scorers:
        raw = scorer.score(state, slot_array)
        if raw is None:
            continue
        total += weight * scorer.normalize(state, raw)
        weight_sum += weight
    maximum = 100 * weight_sum
    linear = (total * MAX_PRIORITY // maximum) if maximum else np.zeros_like(total)
    linear = np.clip(linear, 0, MAX_PRIORITY)
    ties = np.flatnonzero(total == total.max())
    pick = int(ties[tie_break(snapshot, slot_array[ties], state.pod_hash())])
    if scoring is Scoring.DECISIVE:
        linear = np.minimum(linear, MAX_PRIORITY - 1)
        linear[pick] = MAX_PRIORITY
    by_name = dict(zip(known_names, linear.tolist(), strict=True))
    totals = dict(zip(known_names, total.tolist(), strict=True))
    return Priorities(
        hosts=tuple((n, int(by_name.get(n, 0))) for n in names),
        totals=totals,
        choice=known_names[pick],
    )
