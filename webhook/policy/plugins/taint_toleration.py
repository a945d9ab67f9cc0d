"""TaintToleration.

Filter: a NoSchedule/NoExecute taint that the pod does not tolerate rejects
the node, reason "node(s) had untolerated taint(s)" — the words of the pinned
kube-scheduler (v1.37), which no longer names the taint (values may be
private); tests/e2e/test_parity.py diffs the two.
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
from webhook.policy.nodematch import untolerated_per_taint_set

NAME: Final = "TaintToleration"


UNTOLERATED: Final = "node(s) had untolerated taint(s)"


@dataclass
class _Cycle:
    """Per cycle: untolerated PreferNoSchedule taints per taint set of the snapshot."""

    prefer_no_schedule: IntArray | None = None


@dataclass(frozen=True)
class TaintToleration:
    name: str = NAME

    def filter(self, state: CycleState) -> FilterResult | None:
        per_set = untolerated_per_taint_set(state)
        codes = np.array([-1 if t is None else 0 for t in per_set], dtype=np.int32)
        if not (codes == 0).any():
            return None
        return FilterResult.from_codes(
            codes[state.snapshot.taint_set[state.slots]], (rejected(UNTOLERATED, NAME),)
        )

    def score(self, state: CycleState, slots: SlotArray) -> IntArray | None:
        cycle = state.data(_Cycle)
        if cycle.prefer_no_schedule is None:
            tols = tuple(t for t in state.pod.tolerations if t.effect in ("", "PreferNoSchedule"))
            counts = [
                sum(1 for t in ts if t.effect == "PreferNoSchedule" and not tolerates(tols, t))
                for ts in state.snapshot.taint_sets
            ]
            cycle.prefer_no_schedule = np.array(counts, dtype=np.int64)
        return cycle.prefer_no_schedule[state.snapshot.taint_set[slots]]

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray:
        return default_normalize(scores, reverse=True)


def build(args: Any) -> TaintToleration:
    return TaintToleration()
