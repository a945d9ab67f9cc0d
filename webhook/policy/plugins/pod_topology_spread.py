"""PodTopologySpread: hard (DoNotSchedule) and soft (ScheduleAnyway) spreading.

Filter, per DoNotSchedule constraint, in order (kube-scheduler's
filtering.go): a node without the topology key is rejected with
"... (missing required label)" (UnschedulableAndUnresolvable); otherwise
skew = matching pods in the node's domain + (1 if the pod matches its own
selector) - global minimum must not exceed maxSkew ("node(s) didn't match pod
topology spread constraints", Unschedulable). Domains and counts come from
nodes that carry every constraint's key and pass the node inclusion
policies (nodeAffinityPolicy Honor by default, nodeTaintsPolicy Ignore by
default); the global minimum is 0 when fewer than minDomains domains exist.
matchLabelKeys are merged into the selector from the pod's labels.

Score (scoring.go): per ScheduleAnyway constraint, count * log(domains + 2)
+ (maxSkew - 1), rounded; normalised so the emptiest domain gets 100.
Without constraints of its own, a pod gets the default constraints: with
defaultingType System, hostname maxSkew 3 and zone maxSkew 5 (ScheduleAnyway).

Counting uses the snapshot's pod label index (never a loop over pods) and
numpy bincounts over per-node domain codes.

The default constraints select the pod's siblings as kube-scheduler's
helper.DefaultSelector does (Services selecting the pod, and the selector of
its controlling ReplicationController, ReplicaSet or StatefulSet, by name):
see webhook/policy/workloads.py. A pod none of them selects gets no default
spreading.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from webhook.policy.interface import (
    MAX_NODE_SCORE,
    ArgsError,
    BoolArray,
    CycleState,
    FilterResult,
    IntArray,
    SlotArray,
    check_fields,
)
from webhook.policy.model import SpreadConstraint
from webhook.policy.nodematch import pod_required_affinity_mask, untolerated_mask
from webhook.policy.selectors import LabelSelector
from webhook.policy.snapshot import ClusterSnapshot
from webhook.policy.status import Code, Status

NAME: Final = "PodTopologySpread"
ERR_REASON_CONSTRAINTS_NOT_MATCH: Final = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH: Final = (
    ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
)
HOSTNAME: Final = "kubernetes.io/hostname"
ZONE: Final = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
SYSTEM: Final = "System"
LIST: Final = "List"
_MAX_INT32: Final = 2**31 - 1


@dataclass(frozen=True)
class DefaultConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str


SYSTEM_DEFAULT_CONSTRAINTS: Final = (
    DefaultConstraint(3, HOSTNAME, SCHEDULE_ANYWAY),
    DefaultConstraint(5, ZONE, SCHEDULE_ANYWAY),
)


@dataclass(frozen=True)
class PodTopologySpreadArgs:
    defaulting_type: str = SYSTEM
    default_constraints: tuple[DefaultConstraint, ...] = ()

    @property
    def effective_defaults(self) -> tuple[DefaultConstraint, ...]:
        if self.defaulting_type == SYSTEM:
            return SYSTEM_DEFAULT_CONSTRAINTS
        return self.default_constraints

    @staticmethod
    def parse(raw: Mapping[str, Any] | None) -> PodTopologySpreadArgs:
        args = check_fields(raw, {"defaultConstraints", "defaultingType"})
        dtype = args.get("defaultingType") or SYSTEM
        if dtype not in (SYSTEM, LIST):
            raise ArgsError("defaultingType", f"unsupported value {dtype!r}: System or List")
        raw_cs = args.get("defaultConstraints") or []
        if not isinstance(raw_cs, list):
            raise ArgsError("defaultConstraints", "must be a list")
        if dtype == SYSTEM and raw_cs:
            raise ArgsError("defaultingType", "must be List when defaultConstraints are given")
        out: list[DefaultConstraint] = []
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(raw_cs):
            p = f"defaultConstraints[{i}]"
            c = check_fields(
                c,
                {
                    "maxSkew",
                    "topologyKey",
                    "whenUnsatisfiable",
                    "labelSelector",
                    "minDomains",
                    "nodeAffinityPolicy",
                    "nodeTaintsPolicy",
                    "matchLabelKeys",
                },
                p,
            )
            skew = c.get("maxSkew")
            if not isinstance(skew, int) or isinstance(skew, bool) or skew <= 0:
                raise ArgsError(f"{p}.maxSkew", "not in valid range (0, inf)")
            key = c.get("topologyKey")
            if not isinstance(key, str) or not key:
                raise ArgsError(f"{p}.topologyKey", "can not be empty")
            when = c.get("whenUnsatisfiable")
            if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
                raise ArgsError(
                    f"{p}.whenUnsatisfiable",
                    f"unsupported value {when!r}: DoNotSchedule or ScheduleAnyway",
                )
            if c.get("labelSelector") is not None:
                raise ArgsError(
                    f"{p}.labelSelector",
                    "constraint must not define a selector, as they deduced for each pod",
                )
            if (key, when) in seen:
                raise ArgsError(p, f"duplicate constraint for topologyKey {key!r} and {when}")
            seen.add((key, when))
            out.append(DefaultConstraint(skew, key, when))
        return PodTopologySpreadArgs(dtype, tuple(out))


@dataclass
class _Cycle:
    """What one cycle computes once and its filter, score and normalize share."""

    default_selector: LabelSelector | None = None
    pod_nodes: dict[LabelSelector, npt.NDArray[np.int64]] = field(default_factory=dict)
    """Per selector: node slots of the matching pods (_matching_pod_nodes)."""
    all_affinity: BoolArray | None = None
    """The pod's required node affinity over every node (node inclusion, Honor)."""
    all_tolerated: BoolArray | None = None
    """Nodes whose NoSchedule/NoExecute taints the pod tolerates, over every node."""
    ignored: BoolArray | None = None
    """Per scored node: left out of scoring (it lacks a constraint's topology key)."""


def default_selector(state: CycleState) -> LabelSelector:
    """The selector of the default constraints (empty: no default spreading)."""
    cycle = state.data(_Cycle)
    if cycle.default_selector is None:
        pod = state.pod
        cycle.default_selector = state.snapshot.workloads.default_selector(
            pod.namespace, pod.labels, pod.controller
        )
    return cycle.default_selector


def _domains(snap: ClusterSnapshot, key: str, slots: SlotArray) -> npt.NDArray[np.int64]:
    """Domain index per slot (ClusterSnapshot.topology_domains)."""
    return snap.topology_domains(key)[0][slots]


def _n_domains(snap: ClusterSnapshot, key: str) -> int:
    return snap.topology_domains(key)[1]


def _has_key(snap: ClusterSnapshot, key: str, slots: SlotArray) -> BoolArray:
    codes = snap.label_codes(key)
    if codes is None:
        return np.zeros(len(slots), dtype=np.bool_)
    return codes[slots] >= 0


def counts_toward(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """countPodsMatchSelector for one pod: an empty selector counts no pod."""
    return not selector.empty and selector.matches(labels)


def _matching_pod_nodes(state: CycleState, selector: LabelSelector) -> npt.NDArray[np.int64]:
    """Node slots (with repetition) of pods in the pod's namespace matching selector
    (terminating pods left out, as kube-scheduler's PodTopologySpread does); once per
    selector and cycle (the default constraints share one selector)."""
    if selector.empty or selector.nothing:
        return np.zeros(0, dtype=np.int64)
    found = state.data(_Cycle).pod_nodes
    hit = found.get(selector)
    if hit is not None:
        return hit
    snap = state.snapshot
    ns = np.array([snap.namespace_id(state.pod.namespace)], dtype=np.int32)
    pslots = snap.match_pods(selector, ns, terminating=False)
    nodes = snap.pod_node[pslots].astype(np.int64)
    hit = found[selector] = nodes[nodes >= 0]
    return hit


@dataclass(frozen=True)
class PodTopologySpread:
    args: PodTopologySpreadArgs = field(default_factory=PodTopologySpreadArgs)
    name: str = NAME

    def constraints(self, state: CycleState, action: str) -> list[SpreadConstraint]:
        pod = state.pod
        if pod.spread_constraints:
            return [c for c in pod.spread_constraints if c.when_unsatisfiable == action]
        defaults = [c for c in self.args.effective_defaults if c.when_unsatisfiable == action]
        if not defaults:
            return []
        sel = default_selector(state)
        if not sel.requirements:
            return []
        return [SpreadConstraint(c.max_skew, c.topology_key, action, sel) for c in defaults]

    def _include(
        self,
        state: CycleState,
        c: SpreadConstraint,
        all_slots: SlotArray,
        base: BoolArray,
    ) -> BoolArray:
        mask = base.copy()
        cycle = state.data(_Cycle)
        if c.node_affinity_policy == "Honor":
            if cycle.all_affinity is None:
                cycle.all_affinity = pod_required_affinity_mask(state, all_slots)
            mask &= cycle.all_affinity
        if c.node_taints_policy == "Honor":
            if cycle.all_tolerated is None:
                cycle.all_tolerated = ~untolerated_mask(state, all_slots)
            mask &= cycle.all_tolerated
        return mask

    # ---------------------------------------------------------------- filter

    def filter(self, state: CycleState) -> FilterResult | None:
        cons = self.constraints(state, DO_NOT_SCHEDULE)
        if not cons:
            return None
        snap = state.snapshot
        all_slots = snap.sorted_slots()
        has_all = np.ones(len(all_slots), dtype=np.bool_)
        for c in cons:
            has_all &= _has_key(snap, c.topology_key, all_slots)
        slots = state.slots
        codes = np.full(len(slots), -1, dtype=np.int32)
        statuses = (
            Status(Code.UnschedulableAndUnresolvable, (ERR_REASON_NODE_LABEL_NOT_MATCH,), NAME),
            Status(Code.Unschedulable, (ERR_REASON_CONSTRAINTS_NOT_MATCH,), NAME),
        )
        cap_include = np.zeros(len(snap.alive), dtype=np.bool_)
        for c in cons:
            include = self._include(state, c, all_slots, has_all)
            dom_of_slot, n_dom = snap.topology_domains(c.topology_key)
            dom_all = dom_of_slot[all_slots]
            present = np.bincount(dom_all[include], minlength=n_dom) > 0
            cap_include[:] = False
            cap_include[all_slots[include]] = True
            pod_nodes = _matching_pod_nodes(state, c.selector)
            pod_nodes = pod_nodes[cap_include[pod_nodes]]
            counts = np.bincount(dom_of_slot[pod_nodes], minlength=n_dom)
            n_present = int(present.sum())
            if n_present < c.min_domains:
                min_match = 0
            else:
                min_match = int(counts[present].min()) if n_present else _MAX_INT32
            self_match = 1 if c.selector.matches(state.pod.labels) else 0
            has_key = _has_key(snap, c.topology_key, slots)
            dom = _domains(snap, c.topology_key, slots)
            skew = counts[dom] + self_match - min_match
            undecided = codes < 0
            codes[undecided & ~has_key] = 0
            codes[undecided & has_key & (skew > c.max_skew)] = 1
        return FilterResult.from_codes(codes, statuses)

    # ---------------------------------------------------------------- score

    def score(self, state: CycleState, slots: SlotArray) -> IntArray | None:
        cons = self.constraints(state, SCHEDULE_ANYWAY)
        if not cons or len(slots) == 0:
            return None
        snap = state.snapshot
        pod = state.pod
        require_all = bool(pod.spread_constraints) or self.args.defaulting_type != SYSTEM
        all_slots = snap.sorted_slots()

        ignored = np.zeros(len(slots), dtype=np.bool_)
        if require_all:
            for c in cons:
                ignored |= ~_has_key(snap, c.topology_key, slots)
        kept = slots[~ignored]

        # pairs created from the filtered (scored) nodes; sizes per constraint
        pair_created: dict[str, BoolArray] = {}
        sizes: list[int] = []
        for c in cons:
            if c.topology_key == HOSTNAME:
                sizes.append(len(slots) - int(ignored.sum()))
                continue
            key = c.topology_key
            n_dom = _n_domains(snap, key)
            doms = np.bincount(_domains(snap, key, kept), minlength=n_dom) > 0
            if key in pair_created:
                new = doms & ~pair_created[key]
                pair_created[key] |= doms
                sizes.append(int(new.sum()))
            else:
                pair_created[key] = doms
                sizes.append(int(doms.sum()))
        weights = [math.log(s + 2) for s in sizes]

        # pair counts over all nodes (shared between constraints with the same key)
        base = np.ones(len(all_slots), dtype=np.bool_)
        if require_all:
            for c in cons:
                base &= _has_key(snap, c.topology_key, all_slots)
        pair_counts: dict[str, IntArray] = {}
        cap_include = np.zeros(len(snap.alive), dtype=np.bool_)
        for c in cons:
            if c.topology_key == HOSTNAME:
                continue
            key = c.topology_key
            include = self._include(state, c, all_slots, base)
            cap_include[:] = False
            cap_include[all_slots[include]] = True
            dom_of_slot, n_dom = snap.topology_domains(key)
            pod_nodes = _matching_pod_nodes(state, c.selector)
            pod_nodes = pod_nodes[cap_include[pod_nodes]]
            counts = np.bincount(dom_of_slot[pod_nodes], minlength=n_dom)
            counts = np.where(pair_created[key], counts, 0)
            pair_counts[key] = pair_counts.get(key, 0) + counts

        total = np.zeros(len(slots), dtype=np.float64)
        for c, w in zip(cons, weights, strict=True):
            has = _has_key(snap, c.topology_key, slots)
            if c.topology_key == HOSTNAME:
                pod_nodes = _matching_pod_nodes(state, c.selector)
                per_node = np.bincount(pod_nodes, minlength=len(snap.alive))
                cnt = per_node[slots]
            else:
                cnt = pair_counts[c.topology_key][_domains(snap, c.topology_key, slots)]
            total += np.where(has, cnt * w + (c.max_skew - 1), 0.0)
        raw = np.floor(total + 0.5).astype(np.int64)
        state.data(_Cycle).ignored = ignored
        return raw

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray:
        ignored = state.data(_Cycle).ignored
        valid = np.ones(len(scores), dtype=np.bool_) if ignored is None else ~ignored
        out = np.zeros(len(scores), dtype=np.int64)
        if not valid.any():
            return out
        vals = scores[valid]
        min_s = int(vals.min())
        max_s = max(int(vals.max()), 0)
        if max_s == 0:
            out[valid] = MAX_NODE_SCORE
            return out
        out[valid] = MAX_NODE_SCORE * (max_s + min_s - vals) // max_s
        return out


def build(args: Mapping[str, Any] | None) -> PodTopologySpread:
    return PodTopologySpread(PodTopologySpreadArgs.parse(args))
