"""NodeResourcesFit: requests against allocatable, and resource scoring.

Filter (kube-scheduler's fitsRequest): "Too many pods" when the node is at
its pod capacity; "Insufficient <resource>" for cpu, memory,
ephemeral-storage and every extended/scalar resource the pod requests
(except ignoredResources / ignoredResourceGroups). All failing resources are
reported for the node. The status is UnschedulableAndUnresolvable when some
request exceeds the node's allocatable outright, else Unschedulable.

Score strategies (scoringStrategy.type): LeastAllocated (default, cpu and
memory weight 1), MostAllocated, RequestedToCapacityRatio (shape points with
utilization 0..100 and score 0..10, scaled by 10). cpu/memory use the
"non-zero" requests (100m / 200Mi for containers that request nothing), as
kube-scheduler does; extended resources the pod does not request are not
scored. Integer arithmetic mirrors the Go code (truncating division).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from webhook.policy.interface import (
    MAX_NODE_SCORE,
    ArgsError,
    CycleState,
    FilterResult,
    IntArray,
    SlotArray,
    check_fields,
)
from webhook.policy.model import CPU, EPHEMERAL, MEMORY, PODS
from webhook.policy.status import Code, Status

NAME: Final = "NodeResourcesFit"
LEAST_ALLOCATED: Final = "LeastAllocated"
MOST_ALLOCATED: Final = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO: Final = "RequestedToCapacityRatio"
_STRATEGIES: Final = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
MAX_CUSTOM_PRIORITY_SCORE: Final = 10
MAX_UTILIZATION: Final = 100
_QUALIFIED = re.compile(
    r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9](/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$"
)
_GROUP = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@dataclass(frozen=True)
class ResourceSpec:
    name: str
    weight: int = 1


DEFAULT_RESOURCES: Final = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))


def parse_resources(raw: Any, path: str) -> tuple[ResourceSpec, ...]:
    """A `resources` list of {name, weight}; weight defaults to 1, must be 1..100."""
    if raw is None or raw == []:
        return DEFAULT_RESOURCES
    if not isinstance(raw, list):
        raise ArgsError(path, "must be a list")
    out = []
    seen = set()
    for i, r in enumerate(raw):
        p = f"{path}[{i}]"
        r = check_fields(r, {"name", "weight"}, p)
        name = r.get("name")
        if not isinstance(name, str) or not name:
            raise ArgsError(f"{p}.name", "must be a non-empty resource name")
        if name in seen:
            raise ArgsError(f"{p}.name", f"duplicate resource {name!r}")
        seen.add(name)
        w = r.get("weight", 0)
        if not isinstance(w, int) or isinstance(w, bool):
            raise ArgsError(f"{p}.weight", "must be an integer")
        if w == 0:
            w = 1
        if not 1 <= w <= 100:
            raise ArgsError(f"{p}.weight", f"resource weight of {name} not in valid range (0, 100]")
        out.append(ResourceSpec(name, w))
    return tuple(out)


@dataclass(frozen=True)
class ShapePoint:
    utilization: int
    score: int


@dataclass(frozen=True)
class FitArgs:
    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()
    strategy: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    shape: tuple[ShapePoint, ...] = ()

    @staticmethod
    def parse(raw: Mapping[str, Any] | None) -> FitArgs:
        args = check_fields(raw, {"ignoredResources", "ignoredResourceGroups", "scoringStrategy"})
        ignored = args.get("ignoredResources") or []
        if not isinstance(ignored, list):
            raise ArgsError("ignoredResources", "must be a list")
        for i, r in enumerate(ignored):
            if not isinstance(r, str) or not _QUALIFIED.match(r):
                raise ArgsError(f"ignoredResources[{i}]", f"not a valid resource name: {r!r}")
        groups = args.get("ignoredResourceGroups") or []
        if not isinstance(groups, list):
            raise ArgsError("ignoredResourceGroups", "must be a list")
        for i, g in enumerate(groups):
            if not isinstance(g, str) or "/" in g or not _GROUP.match(g):
                raise ArgsError(
                    f"ignoredResourceGroups[{i}]", f"not a valid resource group name: {g!r}"
                )
        strat = check_fields(
            args.get("scoringStrategy"),
            {"type", "resources", "requestedToCapacityRatio"},
            "scoringStrategy",
        )
        # kube-scheduler defaults the whole strategy, but not a missing type
        typ = strat.get("type") if args.get("scoringStrategy") is not None else LEAST_ALLOCATED
        if typ not in _STRATEGIES:
            raise ArgsError(
                "scoringStrategy.type",
                f"unsupported value {typ!r}: supported values are {', '.join(_STRATEGIES)}",
            )
        resources = parse_resources(strat.get("resources"), "scoringStrategy.resources")
        shape: list[ShapePoint] = []
        rtcr = strat.get("requestedToCapacityRatio")
        if typ == REQUESTED_TO_CAPACITY_RATIO:
            p = "scoringStrategy.requestedToCapacityRatio"
            rtcr = check_fields(rtcr, {"shape"}, p)
            points = rtcr.get("shape")
            if not isinstance(points, list) or not points:
                raise ArgsError(f"{p}.shape", "at least one point must be specified")
            for i, pt in enumerate(points):
                pp = f"{p}.shape[{i}]"
                pt = check_fields(pt, {"utilization", "score"}, pp)
                u, s = pt.get("utilization", 0), pt.get("score", 0)
                for fname, v, hi in (("utilization", u, MAX_UTILIZATION), ("score", s, 10)):
                    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= hi:
                        raise ArgsError(f"{pp}.{fname}", f"must be an integer in the range 0-{hi}")
                if shape and u <= shape[-1].utilization:
                    raise ArgsError(
                        f"{pp}.utilization", "utilization values must be sorted in increasing order"
                    )
                shape.append(ShapePoint(u, s))
        elif rtcr is not None:
            raise ArgsError(
                "scoringStrategy.requestedToCapacityRatio",
                f"only valid with type {REQUESTED_TO_CAPACITY_RATIO}",
            )
        return FitArgs(frozenset(ignored), frozenset(groups), typ, resources, tuple(shape))


def is_extended(name: str) -> bool:
    """v1helper.IsExtendedResourceName: namespaced outside kubernetes.io, not requests.*."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def broken_linear(shape: tuple[ShapePoint, ...], p: IntArray) -> IntArray:
    """helper.BuildBrokenLinearFunction, scores scaled to MaxNodeScore, vectorised."""
    us = np.array([s.utilization for s in shape], dtype=np.int64)
    ss = np.array(
        [s.score * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE) for s in shape], dtype=np.int64
    )
    i = np.searchsorted(us, p, side="left")
    out = np.empty(len(p), dtype=np.int64)
    first = i == 0
    last = i >= len(us)
    mid = ~first & ~last
    out[first] = ss[0]
    out[last] = ss[-1]
    if mid.any():
        j = i[mid]
        num = (ss[j] - ss[j - 1]) * (p[mid] - us[j - 1])
        den = us[j] - us[j - 1]
        q = np.abs(num) // den
        out[mid] = ss[j - 1] + np.where(num < 0, -q, q)
    return out


@dataclass(frozen=True)
class NodeResourcesFit:
    args: FitArgs = field(default_factory=FitArgs)
    name: str = NAME

    # ---------------------------------------------------------------- filter

    def filter(self, state: CycleState) -> FilterResult | None:
        snap = state.snapshot
        slots = state.slots
        pod = state.pod
        checks: list[tuple[str, np.ndarray, np.ndarray]] = []  # reason, fail, unresolvable
        alloc = snap.allocatable
        req = snap.requested
        pods_col = 3
        too_many = req[slots, pods_col] + 1 > alloc[slots, pods_col]
        checks.append(("Too many pods", too_many, np.zeros(len(slots), dtype=np.bool_)))
        if pod.requests:
            names = [CPU, MEMORY, EPHEMERAL]
            names += sorted(r for r in pod.requests if r not in (CPU, MEMORY, EPHEMERAL, PODS))
            for r in names:
                want = pod.requests.get(r, 0)
                if want <= 0:
                    continue
                if is_extended(r) and (
                    r in self.args.ignored_resources
                    or r.split("/")[0] in self.args.ignored_resource_groups
                ):
                    continue
                col = snap.resource_column(r)
                if col is None:
                    a = np.zeros(len(slots), dtype=np.int64)
                    used = a
                else:
                    a = alloc[slots, col]
                    used = req[slots, col]
                checks.append((f"Insufficient {r}", want > a - used, want > a))
        bits = np.zeros(len(slots), dtype=np.int64)
        for i, (_, fail, _) in enumerate(checks):
            bits |= fail.astype(np.int64) << i
        if not bits.any():
            return None
        unres_bits = np.zeros(len(slots), dtype=np.int64)
        for i, (_, fail, unres) in enumerate(checks):
            unres_bits |= (fail & unres).astype(np.int64) << i
        combo = bits * 2 + (unres_bits != 0)
        failing = bits != 0
        uniq, inverse = np.unique(combo[failing], return_inverse=True)
        statuses = []
        for u in uniq.tolist():
            b, unresolvable = u >> 1, u & 1
            reasons = tuple(checks[i][0] for i in range(len(checks)) if b >> i & 1)
            code = Code.UnschedulableAndUnresolvable if unresolvable else Code.Unschedulable
            statuses.append(Status(code, reasons, NAME))
        codes = np.full(len(slots), -1, dtype=np.int32)
        codes[failing] = inverse.astype(np.int32)
        return FilterResult(codes, tuple(statuses))

    # ---------------------------------------------------------------- score

    def score(self, state: CycleState, slots: SlotArray) -> IntArray | None:
        rtcr = self.args.strategy == REQUESTED_TO_CAPACITY_RATIO
        return resource_scores(
            state, slots, self.args.resources, self._scorer, use_requested=False, rtcr=rtcr
        )

    def _scorer(self, requested: IntArray, allocatable: IntArray) -> IntArray:
        strat = self.args.strategy
        cap = np.maximum(allocatable, 1)
        if strat == LEAST_ALLOCATED:
            s = ((allocatable - requested) * MAX_NODE_SCORE) // cap
            return np.where((allocatable == 0) | (requested > allocatable), 0, s)
        if strat == MOST_ALLOCATED:
            r = np.minimum(requested, allocatable)
            return np.where(allocatable == 0, 0, (r * MAX_NODE_SCORE) // cap)
        util = np.where(
            (allocatable == 0) | (requested > allocatable),
            MAX_UTILIZATION,
            (np.maximum(requested, 0) * MAX_UTILIZATION) // cap,
        )
        return broken_linear(self.args.shape, util)

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray:
        return scores


def resource_columns(
    state: CycleState,
    slots: SlotArray,
    resources: tuple[ResourceSpec, ...],
    use_requested: bool,
) -> list[tuple[ResourceSpec, IntArray, IntArray]]:
    """resourceAllocationScorer: (spec, requested incl. pod, allocatable) per scored resource."""
    snap = state.snapshot
    pod = state.pod
    out = []
    for spec in resources:
        r = spec.name
        if r in (CPU, MEMORY):
            col = 0 if r == CPU else 1
            if use_requested:
                pod_req = pod.requests.get(r, 0)
                node_req = snap.requested[slots, col]
            else:
                pod_req = pod.nonzero_cpu if r == CPU else pod.nonzero_memory
                node_req = snap.nonzero_requested[slots, col]
            alloc = snap.allocatable[slots, col]
            out.append((spec, node_req + pod_req, alloc))
            continue
        pod_req = pod.requests.get(r, 0)
        if r != EPHEMERAL and pod_req == 0:
            continue  # extended resource the pod does not request: not scored
        col_i = snap.resource_column(r)
        if col_i is None:
            continue
        out.append((spec, snap.requested[slots, col_i] + pod_req, snap.allocatable[slots, col_i]))
    return out


def resource_scores(
    state: CycleState,
    slots: SlotArray,
    resources: tuple[ResourceSpec, ...],
    scorer: Callable[[IntArray, IntArray], IntArray],
    use_requested: bool,
    rtcr: bool = False,
) -> IntArray:
    """Weighted mean of per-resource scores, skipping resources with zero allocatable."""
    cols = resource_columns(state, slots, resources, use_requested)
    node_score = np.zeros(len(slots), dtype=np.int64)
    weight_sum = np.zeros(len(slots), dtype=np.int64)
    for spec, req, alloc in cols:
        s = scorer(req, alloc)
        counted = alloc != 0
        if rtcr:
            counted &= s > 0
        node_score += np.where(counted, s * spec.weight, 0)
        weight_sum += np.where(counted, spec.weight, 0)
    safe = np.maximum(weight_sum, 1)
    # RequestedToCapacityRatio rounds (math.Round, values are non-negative); others truncate
    result = np.floor(node_score / safe + 0.5).astype(np.int64) if rtcr else node_score // safe
    return np.where(weight_sum == 0, 0, result)


def build(args: Mapping[str, Any] | None) -> NodeResourcesFit:
    return NodeResourcesFit(FitArgs.parse(args))
