"""InterPodAffinity: required and preferred pod (anti-)affinity.

Filter, in kube-scheduler's order:
1. the pod's required affinity: the node must carry every term's topology
   key, and each term's domain must hold a pod matching *all* terms -- unless
   no such pod exists anywhere and the pod matches its own terms (first pod
   of a group); reason "node(s) didn't match pod affinity rules"
   (UnschedulableAndUnresolvable);
2. the pod's required anti-affinity: no matching pod in the node's domain of
   any term; "node(s) didn't match pod anti-affinity rules" (Unschedulable);
3. existing pods' required anti-affinity against the incoming pod: no
   existing pod whose term matches the incoming pod may share the node's
   domain; "node(s) didn't satisfy existing pods anti-affinity rules"
   (Unschedulable).

Score: for each topology domain, + weight per existing pod matching a
preferred affinity term of the pod, - weight for anti-affinity, +
hardPodAffinityWeight per existing pod whose *required* affinity term
matches the incoming pod, +/- weight for existing pods' preferred terms that
match the incoming pod; node score = sum over its domains, normalised
min-max to 0..100.

Namespaces: a term covers its `namespaces`, plus the namespaces whose labels
match `namespaceSelector` ({} = all), or the pod's own namespace when both
are unset. Namespace labels come from the snapshot (Namespace objects); a
namespace the snapshot has no object for is treated as carrying only
`kubernetes.io/metadata.name`.

Existing pods' terms are grouped in the snapshot (identical terms of many
replicas count once, with a per-node multiplicity), and matching pods are
found with the pod label index, so no step loops over all pods.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from webhook.policy.arrays import member_mask
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
from webhook.policy.model import AffinityTerm, WeightedAffinityTerm
from webhook.policy.snapshot import ClusterSnapshot
from webhook.policy.status import Code, Status
from webhook.policy.term_index import TermTable

NAME: Final = "InterPodAffinity"
ERR_REASON_AFFINITY: Final = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY: Final = "node(s) didn't match pod anti-affinity rules"
ERR_REASON_EXISTING_ANTI_AFFINITY: Final = (
    "node(s) didn't satisfy existing pods anti-affinity rules"
)


@dataclass(frozen=True)
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False

    @staticmethod
    def parse(raw: Mapping[str, Any] | None) -> InterPodAffinityArgs:
        args = check_fields(raw, {"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"})
        w = args.get("hardPodAffinityWeight", 1)
        if not isinstance(w, int) or isinstance(w, bool) or not 0 <= w <= 100:
            raise ArgsError("hardPodAffinityWeight", f"{w!r} not in valid range [0, 100]")
        ign = args.get("ignorePreferredTermsOfExistingPods", False)
        if not isinstance(ign, bool):
            raise ArgsError("ignorePreferredTermsOfExistingPods", "must be true or false")
        return InterPodAffinityArgs(w, ign)


def _term_pods(state: CycleState, term: AffinityTerm) -> set[int]:
    """Pod slots of counted pods matched by an incoming pod's term."""
    snap = state.snapshot
    ns_ids = snap.namespace_ids_matching(term)
    return set(snap.match_pods(term.selector, ns_ids).tolist())


def _domain_counts(
    snap: ClusterSnapshot, key: str, pslots: Iterable[int] | npt.NDArray[np.int64]
) -> IntArray | None:
    """Matching pods per value code of `key` (pods on nodes without the key ignored)."""
    col = snap.label_columns.get(key)
    if col is None:
        return None
    arr = np.fromiter(pslots, dtype=np.int64) if not isinstance(pslots, np.ndarray) else pslots
    nodes = snap.pod_node[arr]
    nodes = nodes[nodes >= 0]
    codes = col.codes[nodes]
    codes = codes[codes >= 0]
    return np.bincount(codes, minlength=len(col.values)).astype(np.int64)


def _node_domain_mask(
    snap: ClusterSnapshot, key: str, codes_hit: IntArray | None, slots: SlotArray
) -> BoolArray:
    """True for slots whose value of `key` has a positive count."""
    col = snap.label_columns.get(key)
    if col is None or codes_hit is None:
        return np.zeros(len(slots), dtype=np.bool_)
    c = col.codes[slots]
    hit = np.zeros(len(col.values) + 1, dtype=np.bool_)
    hit[: len(codes_hit)] = codes_hit > 0
    return (c >= 0) & hit[np.where(c >= 0, c, len(col.values))]


def _group_nodes(
    snap: ClusterSnapshot, nodes: Counter[str], key: str
) -> tuple[IntArray, IntArray] | None:
    """(value codes, multiplicities) of the nodes hosting a term group."""
    col = snap.label_columns.get(key)
    if col is None:
        return None
    codes: list[int] = []
    mult: list[int] = []
    for node_name, n in nodes.items():
        slot = snap.slot_of(node_name)
        if slot is None:
            continue
        c = int(col.codes[slot])
        if c >= 0:
            codes.append(c)
            mult.append(n)
    return np.array(codes, dtype=np.int64), np.array(mult, dtype=np.int64)


@dataclass(frozen=True)
class InterPodAffinity:
    args: InterPodAffinityArgs = field(default_factory=InterPodAffinityArgs)
    name: str = NAME

    # ---------------------------------------------------------------- filter

    def filter(self, state: CycleState) -> FilterResult | None:
        pod = state.pod
        snap = state.snapshot
        existing_anti = snap.term_groups["req_anti"]
        if not pod.required_affinity and not pod.required_anti_affinity and not existing_anti:
            return None
        slots = state.slots
        codes = np.full(len(slots), -1, dtype=np.int32)
        statuses = (
            Status(Code.UnschedulableAndUnresolvable, (ERR_REASON_AFFINITY,), NAME),
            Status(Code.Unschedulable, (ERR_REASON_ANTI_AFFINITY,), NAME),
            Status(Code.Unschedulable, (ERR_REASON_EXISTING_ANTI_AFFINITY,), NAME),
        )

        if pod.required_affinity:
            ok = self._affinity_ok(state, slots)
            codes[~ok] = 0

        if pod.required_anti_affinity:
            bad = np.zeros(len(slots), dtype=np.bool_)
            for term in pod.required_anti_affinity:
                counts = _domain_counts(snap, term.topology_key, _term_pods(state, term))
                bad |= _node_domain_mask(snap, term.topology_key, counts, slots)
            codes[(codes < 0) & bad] = 1

        if existing_anti:
            bad = self._existing_anti_mask(state, existing_anti, slots)
            codes[(codes < 0) & bad] = 2
        return FilterResult.from_codes(codes, statuses)

    def _affinity_ok(self, state: CycleState, slots: SlotArray) -> BoolArray:
        pod = state.pod
        snap = state.snapshot
        terms = pod.required_affinity
        matched: set[int] | None = None
        for term in terms:
            found = _term_pods(state, term)
            matched = found if matched is None else matched & found
            if not matched:
                break
        matched = matched or set()
        has_all = np.ones(len(slots), dtype=np.bool_)
        in_domains = np.ones(len(slots), dtype=np.bool_)
        any_count = False
        for term in terms:
            codes = snap.label_codes(term.topology_key)
            if codes is None:
                has_all[:] = False
                continue
            has_all &= codes[slots] >= 0
            counts = _domain_counts(snap, term.topology_key, matched) if matched else None
            if counts is not None and counts.any():
                any_count = True
            in_domains &= _node_domain_mask(snap, term.topology_key, counts, slots)
        if not any_count:
            ns_labels = state.namespace_labels
            if all(t.matches(pod.namespace, pod.labels, ns_labels) for t in terms):
                return has_all
        return has_all & in_domains

    def _existing_anti_mask(
        self, state: CycleState, groups: TermTable[AffinityTerm], slots: SlotArray
    ) -> BoolArray:
        pod = state.pod
        snap = state.snapshot
        ns_labels = state.namespace_labels
        blocked: dict[str, set[int]] = {}
        for term, nodes in groups.selecting(pod.labels):
            if not term.matches(pod.namespace, pod.labels, ns_labels):
                continue
            got = _group_nodes(snap, nodes, term.topology_key)
            if got is None or len(got[0]) == 0:
                continue
            blocked.setdefault(term.topology_key, set()).update(got[0].tolist())
        bad = np.zeros(len(slots), dtype=np.bool_)
        for key, values in blocked.items():
            codes = snap.label_codes(key)
            if codes is not None:
                bad |= member_mask(codes[slots], values)
        return bad

    # ---------------------------------------------------------------- score

    def score(self, state: CycleState, slots: SlotArray) -> IntArray | None:
        pod = state.pod
        snap = state.snapshot
        has_constraints = bool(pod.preferred_affinity or pod.preferred_anti_affinity)
        if self.args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return None
        topo: dict[str, IntArray] = {}

        def add(key: str, codes: IntArray, amounts: IntArray) -> None:
            col = snap.label_columns.get(key)
            if col is None or len(codes) == 0:
                return
            arr = topo.get(key)
            if arr is None or len(arr) < len(col.values):
                grown = np.zeros(len(col.values), dtype=np.int64)
                if arr is not None:
                    grown[: len(arr)] = arr
                arr = grown
            np.add.at(arr, codes, amounts)
            topo[key] = arr

        def incoming(terms: tuple[WeightedAffinityTerm, ...], sign: int) -> None:
            for wt in terms:
                counts = _domain_counts(snap, wt.term.topology_key, _term_pods(state, wt.term))
                if counts is None:
                    continue
                nz = np.flatnonzero(counts)
                add(wt.term.topology_key, nz, counts[nz] * wt.weight * sign)

        incoming(pod.preferred_affinity, 1)
        incoming(pod.preferred_anti_affinity, -1)

        ns_labels = state.namespace_labels

        def existing(kind: str, sign: int) -> None:
            for t, nodes in snap.term_groups[kind].selecting(pod.labels):
                if isinstance(t, WeightedAffinityTerm):
                    term, weight = t.term, t.weight
                else:
                    term, weight = t, self.args.hard_pod_affinity_weight
                if weight == 0 or not term.matches(pod.namespace, pod.labels, ns_labels):
                    continue
                got = _group_nodes(snap, nodes, term.topology_key)
                if got is None:
                    continue
                add(term.topology_key, got[0], got[1] * weight * sign)

        if self.args.hard_pod_affinity_weight > 0:
            existing("req_aff", 1)
        existing("pref_aff", 1)
        existing("pref_anti", -1)

        total = np.zeros(len(slots), dtype=np.int64)
        for key, arr in topo.items():
            col = snap.label_columns[key]
            c = col.codes[slots]
            padded = np.zeros(len(col.values) + 1, dtype=np.int64)
            padded[: len(arr)] = arr
            total += np.where(c >= 0, padded[np.where(c >= 0, c, len(col.values))], 0)
        return total

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray:
        if len(scores) == 0:
            return scores
        lo, hi = int(scores.min()), int(scores.max())
        if hi - lo <= 0:
            return np.zeros(len(scores), dtype=np.int64)
        return (MAX_NODE_SCORE * ((scores - lo) / (hi - lo))).astype(np.int64)


def build(args: Mapping[str, Any] | None) -> InterPodAffinity:
    return InterPodAffinity(InterPodAffinityArgs.parse(args))
