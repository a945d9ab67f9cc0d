"""NodeResourcesBalancedAllocation: prefer nodes whose resource fractions
(requested incl. the pod / allocatable, capped at 1) are close to each other.

score = int((1 - std) * 100), std over the configured resources (default cpu
and memory; with two resources std = |f1 - f2| / 2). Actual requests are
used (no non-zero defaults); best-effort pods (no requests for the
configured resources) are not scored, as in kube-scheduler >= 1.32.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from webhook.policy.interface import (
    MAX_NODE_SCORE,
    ArgsError,
    CycleState,
    IntArray,
    SlotArray,
    check_fields,
)
from webhook.policy.plugins.node_resources_fit import (
    DEFAULT_RESOURCES,
    ResourceSpec,
    parse_resources,
    resource_columns,
)

NAME: Final = "NodeResourcesBalancedAllocation"


@dataclass(frozen=True)
class BalancedAllocationArgs:
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES

    @staticmethod
    def parse(raw: Mapping[str, Any] | None) -> BalancedAllocationArgs:
        args = check_fields(raw, {"resources"})
        resources = parse_resources(args.get("resources"), "resources")
        for i, r in enumerate(resources):
            if r.weight != 1:
                raise ArgsError(f"resources[{i}].weight", f"must be 1, got {r.weight}")
        return BalancedAllocationArgs(resources)


@dataclass(frozen=True)
class NodeResourcesBalancedAllocation:
    args: BalancedAllocationArgs = field(default_factory=BalancedAllocationArgs)
    name: str = NAME

    def score(self, state: CycleState, slots: SlotArray) -> IntArray | None:
        pod = state.pod
        if all(pod.requests.get(r.name, 0) == 0 for r in self.args.resources):
            return None  # best-effort pod: skip
        cols = resource_columns(state, slots, self.args.resources, use_requested=True)
        fracs = []
        valid = []
        for _, req, alloc in cols:
            ok = alloc != 0
            f = np.where(ok, req / np.maximum(alloc, 1), 0.0)
            fracs.append(np.minimum(f, 1.0))
            valid.append(ok)
        if not fracs:
            return np.full(len(slots), MAX_NODE_SCORE, dtype=np.int64)
        f_arr = np.vstack(fracs)
        v_arr = np.vstack(valid)
        count = v_arr.sum(axis=0)
        safe = np.maximum(count, 1)
        mean = np.where(v_arr, f_arr, 0.0).sum(axis=0) / safe
        var = np.where(v_arr, (f_arr - mean) ** 2, 0.0).sum(axis=0) / safe
        std = np.sqrt(var)
        if len(fracs) == 2:
            two = np.abs(f_arr[0] - f_arr[1]) / 2
            std = np.where(count == 2, two, std)
        std = np.where(count >= 2, std, 0.0)
        return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray:
        return scores


def build(args: Mapping[str, Any] | None) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(BalancedAllocationArgs.parse(args))
