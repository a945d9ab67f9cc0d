"""Vectorised node matching: node selectors, node affinity and taints over slots.

Every function returns one boolean per entry of `slots`, computed from the
snapshot's per-label-key value codes, so the cost is a few numpy operations
per requirement, independent of the number of labels a node carries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from webhook.policy.arrays import member_mask
from webhook.policy.interface import BoolArray, CycleState, SlotArray
from webhook.policy.model import PodView, Taint, Toleration, tolerates
from webhook.policy.selectors import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from webhook.policy.snapshot import ClusterSnapshot

__all__ = [
    "first_untolerated_taint",
    "match_label_selector_map",
    "match_node_selector",
    "match_requirement",
    "match_term",
    "pod_matches_node",
    "pod_required_affinity_mask",
    "untolerated_mask",
]

DO_NOT_SCHEDULE_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def _codes(snap: ClusterSnapshot, key: str, slots: SlotArray) -> np.ndarray:
    codes = snap.label_codes(key)
    if codes is None:
        return np.full(len(slots), -1, dtype=np.int32)
    return codes[slots]


def match_requirement(
    snap: ClusterSnapshot, req: NodeSelectorRequirement, slots: SlotArray
) -> BoolArray:
    if not req.valid:
        return np.zeros(len(slots), dtype=np.bool_)
    col = snap.label_columns.get(req.key)
    if col is None:
        present = np.zeros(len(slots), dtype=np.bool_)
        if req.op in ("NotIn", "DoesNotExist"):
            return ~present
        return present
    codes = col.codes[slots]
    op = req.op
    if op in ("In", "NotIn"):
        wanted = [col.index[v] for v in req.values if v in col.index]
        hit = member_mask(codes, wanted)
        return hit if op == "In" else ~hit
    if op == "Exists":
        return codes >= 0
    if op == "DoesNotExist":
        return codes < 0
    assert req.number is not None
    nums, ok = col.numbers()
    present = codes >= 0
    safe = np.where(present, codes, 0)
    valid = present & ok[safe] if len(nums) else np.zeros(len(slots), dtype=np.bool_)
    vals = nums[safe] if len(nums) else np.zeros(len(slots), dtype=np.int64)
    cmp = vals > req.number if op == "Gt" else vals < req.number
    return valid & cmp


def match_term(snap: ClusterSnapshot, term: NodeSelectorTerm, slots: SlotArray) -> BoolArray:
    if not term.valid or term.empty:
        return np.zeros(len(slots), dtype=np.bool_)
    mask = np.ones(len(slots), dtype=np.bool_)
    for r in term.expressions:
        mask &= match_requirement(snap, r, slots)
    for r in term.fields:
        names = [snap.slot_of(v) for v in r.values]
        targets = [s for s in names if s is not None]
        hit = member_mask(slots, targets)
        mask &= hit if r.op == "In" else ~hit
    return mask


def match_node_selector(snap: ClusterSnapshot, sel: NodeSelector, slots: SlotArray) -> BoolArray:
    mask = np.zeros(len(slots), dtype=np.bool_)
    for t in sel.terms:
        mask |= match_term(snap, t, slots)
    return mask


def match_label_selector_map(
    snap: ClusterSnapshot, selector: Mapping[str, str], slots: SlotArray
) -> BoolArray:
    """pod.spec.nodeSelector: every key=value must be present."""
    mask = np.ones(len(slots), dtype=np.bool_)
    for k, v in selector.items():
        col = snap.label_columns.get(k)
        if col is None or v not in col.index:
            return np.zeros(len(slots), dtype=np.bool_)
        mask &= col.codes[slots] == col.index[v]
    return mask


def pod_required_affinity_mask(state: CycleState, slots: SlotArray | None = None) -> BoolArray:
    """nodeaffinity.GetRequiredNodeAffinity(pod).Match: nodeSelector AND required affinity.

    Computed once per cycle for `state.slots` (`state.shared`); other slots are not kept.
    """

    def compute(s: SlotArray) -> BoolArray:
        pod = state.pod
        mask = np.ones(len(s), dtype=np.bool_)
        if pod.node_selector:
            mask &= match_label_selector_map(state.snapshot, pod.node_selector, s)
        if pod.required_node_affinity is not None:
            mask &= match_node_selector(state.snapshot, pod.required_node_affinity, s)
        return mask

    if slots is not None:
        return compute(slots)
    shared = state.shared
    if shared.required_node_affinity is None:
        shared.required_node_affinity = compute(state.slots)
    return shared.required_node_affinity


def pod_matches_node(pod: PodView, name: str, labels: Mapping[str, str]) -> bool:
    """`pod_required_affinity_mask` for one node: conflict detection checks placed pods."""
    if any(labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    rna = pod.required_node_affinity
    return rna is None or rna.matches(name, labels)


def first_untolerated_taint(
    taints: Iterable[Taint], tolerations: Iterable[Toleration], effects: frozenset[str]
) -> Taint | None:
    """v1helper.FindMatchingUntoleratedTaint with an effect filter."""
    tols = tuple(tolerations)
    for t in taints:
        if t.effect in effects and not tolerates(tols, t):
            return t
    return None


def untolerated_per_taint_set(state: CycleState) -> list[Taint | None]:
    """For each distinct taint set in the snapshot: the first NoSchedule/NoExecute taint
    the pod does not tolerate, or None (once per cycle, in `state.shared`)."""
    shared = state.shared
    if shared.untolerated_taints is None:
        shared.untolerated_taints = [
            first_untolerated_taint(ts, state.pod.tolerations, DO_NOT_SCHEDULE_EFFECTS)
            for ts in state.snapshot.taint_sets
        ]
    return shared.untolerated_taints


def untolerated_mask(state: CycleState, slots: SlotArray | None = None) -> BoolArray:
    """Nodes with a NoSchedule/NoExecute taint the pod does not tolerate."""
    bad = np.array([t is not None for t in untolerated_per_taint_set(state)], dtype=np.bool_)
    s = state.slots if slots is None else slots
    return bad[state.snapshot.taint_set[s]]
