"""NodeResourcesBalancedAllocation: prefer nodes that the pod leaves better balanced.

Kubernetes v1.37 (`balancedResourceScorer`) scores the *change* in balance,
not the balance after placing the pod:

    balance(fractions) = int((1 - std(fractions)) * 100)
    score = 50 + (50 + balance(with pod) - balance(without pod)) / 2   (Go integer division)

Fractions are requested / allocatable per configured resource (default cpu
and memory), capped at 1; a resource with zero allocatable on the node, or
an extended resource the pod does not request, takes no part. With two
resources std = |f1 - f2| / 2; with one or none it is 0. Actual requests are
used (no non-zero defaults). Best-effort pods (no request for any configured
resource) are not scored at all (PreScore returns Skip).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

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
FloatArray = npt.NDArray[np.float64]


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


class _Balance:
    """int((1 - std) * 100) per node over the resources with non-zero allocatable, for
    any requested amounts (with and without the pod share the allocatable part)."""

    def __init__(self, allocatable: Sequence[IntArray]) -> None:
        alloc = np.vstack(allocatable)
        self.used = alloc != 0
        self.denominator = np.where(self.used, alloc, 1)
        self.count = self.used.sum(axis=0)

    def __call__(self, requested: Sequence[IntArray]) -> IntArray:
        used, count = self.used, self.count
        frac: FloatArray = np.minimum(
            np.where(used, np.vstack(requested) / self.denominator, 0.0), 1.0
        )
        if len(frac) == 2:  # exactly two fractions: the Go code's |f1 - f2| / 2
            std = np.where(count == 2, np.abs(frac[0] - frac[1]) / 2, 0.0)
        else:
            mean = frac.sum(axis=0) / np.maximum(count, 1)
            var = np.where(used, (frac - mean) ** 2, 0.0).sum(axis=0) / np.maximum(count, 1)
            std = np.sqrt(var)
            # two of them on this node: the shortcut again (the same value, other rounding)
            high = np.where(used, frac, -np.inf).max(axis=0)
            low = np.where(used, frac, np.inf).min(axis=0)
            std = np.where(count == 2, (high - low) / 2, std)
            std = np.where(count >= 2, std, 0.0)
        return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)


@dataclass(frozen=True)
class NodeResourcesBalancedAllocation:
    args: BalancedAllocationArgs = field(default_factory=BalancedAllocationArgs)
    name: str = NAME

    def score(self, state: CycleState, slots: SlotArray) -> IntArray | None:
        pod = state.pod
        if all(pod.requests.get(r.name, 0) == 0 for r in self.args.resources):
            return None  # best-effort pod: skip
        cols = resource_columns(state, slots, self.args.resources, use_requested=True)
        if not cols:
            return np.full(len(slots), MAX_NODE_SCORE, dtype=np.int64)
        without_pod = [req - _pod_request(state, spec) for spec, req, _ in cols]
        if len(cols) == 2:  # the default (cpu, memory): no stacking, the same arithmetic
            (_, req1, alloc1), (_, req2, alloc2) = cols
            base1, base2 = without_pod
            gain = _balance_gain_of_two(req1, req2, base1, base2, alloc1, alloc2)
        else:
            balance = _Balance([alloc for _, _, alloc in cols])
            with_pod = [req for _, req, _ in cols]
            gain = balance(with_pod) - balance(without_pod)
        half = MAX_NODE_SCORE // 2
        return half + _go_half(half + gain)

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray:
        return scores


def _balance_gain_of_two(
    req1: IntArray,
    req2: IntArray,
    base1: IntArray,
    base2: IntArray,
    alloc1: IntArray,
    alloc2: IntArray,
) -> IntArray:
    """_Balance(with the pod) - _Balance(without it) for exactly two resources, computed
    with the same floating-point operations (so the same truncations) as _Balance."""
    both = (alloc1 != 0) & (alloc2 != 0)
    den1 = np.where(alloc1 != 0, alloc1, 1)
    den2 = np.where(alloc2 != 0, alloc2, 1)

    def balance(r1: IntArray, r2: IntArray) -> IntArray:
        f1 = np.minimum(r1 / den1, 1.0)
        f2 = np.minimum(r2 / den2, 1.0)
        std = np.where(both, np.abs(f1 - f2) / 2, 0.0)
        return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)

    return balance(req1, req2) - balance(base1, base2)


def _go_half(x: IntArray) -> IntArray:
    """x / 2 truncated toward zero, as Go divides integers."""
    return np.where(x >= 0, x // 2, -((-x) // 2))


def _pod_request(state: CycleState, spec: ResourceSpec) -> int:
    return state.pod.requests.get(spec.name, 0)


def build(args: Mapping[str, Any] | None) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(BalancedAllocationArgs.parse(args))
