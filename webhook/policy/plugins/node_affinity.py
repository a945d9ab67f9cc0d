"""NodeAffinity: nodeSelector and required/preferred node affinity, plus the
scheduler-enforced `addedAffinity` from the plugin args.

Filter reasons: "node(s) didn't match Pod's node affinity/selector" and
"node(s) didn't match scheduler-enforced node affinity" (both
UnschedulableAndUnresolvable). The pre-filter narrows the nodes considered
when every required term pins `metadata.name` (DaemonSet pods), exactly like
kube-scheduler's PreFilterResult: other nodes are reported as
"node(s) didn't satisfy plugin(s) [NodeAffinity]".
Score: sum of the weights of matching preferred terms, normalised to 0..100.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from webhook.policy.interface import (
    ArgsError,
    CycleState,
    FilterResult,
    IntArray,
    PreFilterResult,
    SlotArray,
    check_fields,
    default_normalize,
    rejected,
)
from webhook.policy.model import PodView
from webhook.policy.nodematch import match_node_selector, match_term, pod_required_affinity_mask
from webhook.policy.selectors import NodeSelector, NodeSelectorTerm, parse_int64
from webhook.policy.snapshot import ClusterSnapshot

NAME: Final = "NodeAffinity"
ERR_REASON_POD: Final = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED: Final = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT: Final = "pod affinity terms conflict"

_OPS = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"}


def _validate_term(raw: Any, path: str) -> None:
    term = check_fields(raw, {"matchExpressions", "matchFields"}, path)
    for kind in ("matchExpressions", "matchFields"):
        reqs = term.get(kind) or []
        if not isinstance(reqs, list):
            raise ArgsError(f"{path}.{kind}", "must be a list")
        for i, r in enumerate(reqs):
            p = f"{path}.{kind}[{i}]"
            r = check_fields(r, {"key", "operator", "values"}, p)
            op = r.get("operator")
            values = r.get("values") or []
            if not isinstance(values, list):
                raise ArgsError(f"{p}.values", "must be a list")
            if not r.get("key"):
                raise ArgsError(f"{p}.key", "must not be empty")
            if op not in _OPS:
                raise ArgsError(f"{p}.operator", f"not a valid selector operator: {op!r}")
            if kind == "matchFields":
                if r.get("key") != "metadata.name":
                    raise ArgsError(f"{p}.key", "only metadata.name is supported in matchFields")
                if op not in ("In", "NotIn") or len(values) != 1:
                    raise ArgsError(p, "matchFields need operator In or NotIn with one value")
            elif op in ("In", "NotIn") and not values:
                raise ArgsError(f"{p}.values", f"must be non-empty for operator {op}")
            elif op in ("Exists", "DoesNotExist") and values:
                raise ArgsError(f"{p}.values", f"must be empty for operator {op}")
            elif op in ("Gt", "Lt") and (len(values) != 1 or parse_int64(str(values[0])) is None):
                raise ArgsError(f"{p}.values", f"operator {op} needs a single integer value")


@dataclass(frozen=True)
class NodeAffinityArgs:
    added_required: NodeSelector | None = None
    added_preferred: tuple[tuple[int, NodeSelectorTerm], ...] = ()

    @staticmethod
    def parse(raw: Mapping[str, Any] | None) -> NodeAffinityArgs:
        args = check_fields(raw, {"addedAffinity"})
        added = args.get("addedAffinity")
        if added is None:
            return NodeAffinityArgs()
        aff = check_fields(
            added,
            {
                "requiredDuringSchedulingIgnoredDuringExecution",
                "preferredDuringSchedulingIgnoredDuringExecution",
            },
            "addedAffinity",
        )
        req = aff.get("requiredDuringSchedulingIgnoredDuringExecution")
        required = None
        if req is not None:
            p = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            sel = check_fields(req, {"nodeSelectorTerms"}, p)
            terms = sel.get("nodeSelectorTerms") or []
            if not isinstance(terms, list) or not terms:
                raise ArgsError(f"{p}.nodeSelectorTerms", "must have at least one term")
            for i, t in enumerate(terms):
                _validate_term(t, f"{p}.nodeSelectorTerms[{i}]")
            required = NodeSelector.parse(sel)
        preferred = []
        p = "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        pref_raw = aff.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        if not isinstance(pref_raw, list):
            raise ArgsError(p, "must be a list")
        for i, t in enumerate(pref_raw):
            t = check_fields(t, {"weight", "preference"}, f"{p}[{i}]")
            w = t.get("weight")
            if not isinstance(w, int) or isinstance(w, bool) or not 1 <= w <= 100:
                raise ArgsError(f"{p}[{i}].weight", "must be an integer in the range 1-100")
            _validate_term(t.get("preference") or {}, f"{p}[{i}].preference")
            preferred.append((w, NodeSelectorTerm.parse(t.get("preference") or {})))
        return NodeAffinityArgs(required, tuple(preferred))


@dataclass(frozen=True)
class NodeAffinity:
    args: NodeAffinityArgs = field(default_factory=NodeAffinityArgs)
    name: str = NAME

    def pre_filter(self, pod: PodView, snapshot: ClusterSnapshot) -> PreFilterResult | None:
        req = pod.required_node_affinity
        if req is None or not req.terms:
            return None
        names: set[str] | None = None
        for t in req.terms:
            term_names: set[str] | None = None
            for r in t.fields:
                if r.key == "metadata.name" and r.op == "In":
                    s = set(r.values)
                    term_names = s if term_names is None else term_names & s
            if term_names is None:
                return None  # this term does not pin names: all nodes are eligible
            names = term_names if names is None else names | term_names
        if names is not None and not names:
            return PreFilterResult(status=rejected(ERR_REASON_CONFLICT, NAME))
        return PreFilterResult(node_names=frozenset(names or ()))

    def filter(self, state: CycleState) -> FilterResult | None:
        pod = state.pod
        codes = np.full(len(state.slots), -1, dtype=np.int32)
        statuses = []
        if pod.node_selector or pod.required_node_affinity is not None:
            ok = pod_required_affinity_mask(state)
            codes[~ok] = 0
            statuses.append(rejected(ERR_REASON_POD, NAME))
        if self.args.added_required is not None:
            enforced = match_node_selector(state.snapshot, self.args.added_required, state.slots)
            codes[~enforced] = len(statuses)
            statuses.append(rejected(ERR_REASON_ENFORCED, NAME))
        if not statuses:
            return None
        return FilterResult.from_codes(codes, tuple(statuses))

    def score(self, state: CycleState, slots: SlotArray) -> IntArray | None:
        terms = [(w, t) for w, t in state.pod.preferred_node_affinity if w and not t.empty]
        terms.extend(self.args.added_preferred)
        if not terms:
            return None
        total = np.zeros(len(slots), dtype=np.int64)
        for w, t in terms:
            total += np.where(match_term(state.snapshot, t, slots), w, 0)
        return total

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray:
        return default_normalize(scores)


def build(args: Mapping[str, Any] | None) -> NodeAffinity:
    return NodeAffinity(NodeAffinityArgs.parse(args))
