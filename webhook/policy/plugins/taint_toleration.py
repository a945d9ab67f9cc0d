"""TaintToleration.

Filter: the first NoSchedule/NoExecute taint (in node order) that the pod does
not tolerate rejects the node, reason "node(s) had untolerated taint {k: v}".
Score: the number of PreferNoSchedule taints not tolerated by the pod's
tolerations with effect PreferNoSchedule or empty; normalised reversed.

Work is per distinct taint set (few in any cluster), then gathered per node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from webhook.policy.interface import (
    CycleState,
    FilterResult,
    IntArray,
    SlotArray,
    default_normalize,
    rejected,
)
from webhook.policy.model import tolerates
from webhook.policy.nodematch import DO_NOT_SCHEDULE_EFFECTS, untolerated_per_taint_set
from webhook.policy.status import Status

NAME: Final = "TaintToleration"


def untolerated_reason(key: str, value: str) -> str:
    return f"node(s) had untolerated taint {{{key}: {value}}}"


@dataclass(frozen=True)
class TaintToleration:
    name: str = NAME

    def filter(self, state: CycleState) -> FilterResult | None:
        per_set = untolerated_per_taint_set(state, DO_NOT_SCHEDULE_EFFECTS)
        statuses: list[Status] = []
        codes = np.full(len(per_set), -1, dtype=np.int32)
        seen: dict[tuple[str, str], int] = {}
        for i, taint in enumerate(per_set):
            if taint is None:
                continue
            k = (taint.key, taint.value)
            if k not in seen:
                seen[k] = len(statuses)
                statuses.append(rejected(untolerated_reason(taint.key, taint.value), NAME))
            codes[i] = seen[k]
        if not statuses:
            return None
        return FilterResult.from_codes(
            codes[state.snapshot.taint_set[state.slots]], tuple(statuses)
        )

    def score(self, state: CycleState, slots: SlotArray) -> IntArray | None:
        tols = tuple(t for t in state.pod.tolerations if t.effect in ("", "PreferNoSchedule"))

        def per_set() -> IntArray:
            counts = [
                sum(1 for t in ts if t.effect == "PreferNoSchedule" and not tolerates(tols, t))
                for ts in state.snapshot.taint_sets
            ]
            return np.array(counts, dtype=np.int64)

        counts = state.cached("prefer_no_schedule_counts", per_set)
        return counts[state.snapshot.taint_set[slots]]

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray:
        return default_normalize(scores, reverse=True)


def build(args: Any) -> TaintToleration:
    return TaintToleration()
