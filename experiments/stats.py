"""Figures of one arm's run, from its per-pod records. Pure.

Throughput is pods over the span from the first request sent to the last
pod bound (created, for the ceiling, which binds nothing): the rate a user
waiting for the whole batch sees. Percentiles are nearest-rank on sorted
values; a pod that never bound is left out of latencies and counted apart.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def cdf(values: Sequence[float]) -> tuple[list[float], list[float]]:
    """Sorted values and their cumulative fractions, for plotting."""
    ordered = sorted(values)
    n = len(ordered)
    return ordered, [(i + 1) / n for i in range(n)]


@dataclass(frozen=True)
class Columns:
    """Per-pod records as columns (compact in results.json)."""

    names: tuple[str, ...]
    sent: tuple[float, ...]
    created: tuple[float | None, ...]
    bound: tuple[float | None, ...]
    nodes: tuple[str | None, ...]
    errors: tuple[str | None, ...]
    running: tuple[float | None, ...] = ()
    """First seen Running (hollow-kubelet scenarios only; empty otherwise)."""
    rejected: tuple[str | None, ...] = ()
    """The kubelet's reason when it refused the pod (hollow-kubelet scenarios only)."""

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Columns:
        return Columns(
            names=tuple(data["names"]),
            sent=tuple(data["sent"]),
            created=tuple(data["created"]),
            bound=tuple(data["bound"]),
            nodes=tuple(data["nodes"]),
            errors=tuple(data["errors"]),
            running=tuple(data.get("running") or ()),
            rejected=tuple(data.get("rejected") or ()),
        )

    def to_dict(self) -> dict[str, Any]:
        def r(v: float | None) -> float | None:  # 0.1 ms: finer than anything measured
            return None if v is None or math.isnan(v) else round(v, 4)

        out = {
            "names": list(self.names),
            "sent": [r(v) for v in self.sent],
            "created": [r(v) for v in self.created],
            "bound": [r(v) for v in self.bound],
            "nodes": list(self.nodes),
            "errors": list(self.errors),
        }
        if self.running or self.rejected:
            out["running"] = [r(v) for v in self.running]
            out["rejected"] = list(self.rejected)
        return out

    def create_latencies(self) -> list[float]:
        return [c - s for s, c in zip(self.sent, self.created, strict=True) if c is not None]

    def bind_latencies(self) -> list[float]:
        return [b - s for s, b in zip(self.sent, self.bound, strict=True) if b is not None]

    def running_latencies(self) -> list[float]:
        return [r - s for s, r in zip(self.sent, self.running, strict=True) if r is not None]


def summarize(columns: Columns, *, binds: bool = True) -> dict[str, Any]:
    """Counts, throughput and latency percentiles (milliseconds) of one run."""
    sent = [s for s in columns.sent if s is not None and not math.isnan(s)]
    created = [c for c in columns.created if c is not None]
    bound = [b for b in columns.bound if b is not None]
    start = min(sent, default=0.0)
    end_created = max(created, default=start)
    end_bound = max(bound, default=start)
    creates = columns.create_latencies()
    binds_ = columns.bind_latencies()
    out: dict[str, Any] = {
        "pods": len(columns.names),
        "created": len(created),
        "bound": len(bound),
        "createErrors": sum(1 for e in columns.errors if e),
        "createSeconds": round(end_created - start, 4),
        "createdPerSecond": _rate(len(created), end_created - start),
        "createLatencyMs": _percentiles(creates),
    }
    if binds:
        out.update(
            {
                "boundSeconds": round(end_bound - start, 4),
                "boundPerSecond": _rate(len(bound), end_bound - start),
                "bindLatencyMs": _percentiles(binds_),
            }
        )
    if columns.running or columns.rejected:
        reasons = Counter(r for r in columns.rejected if r)
        out["running"] = sum(1 for r in columns.running if r is not None)
        out["runningLatencyMs"] = _percentiles(columns.running_latencies())
        out["kubeletRejections"] = {"total": sum(reasons.values()), **dict(sorted(reasons.items()))}
    return out


def _rate(count: int, seconds: float) -> float:
    return round(count / seconds, 2) if seconds > 0 else math.nan


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    return {f"p{q}": round(percentile(values, q) * 1000, 3) for q in (50, 90, 99)} | {
        "max": round(max(values, default=math.nan) * 1000, 3)
    }


def bound_over_time(columns: Columns) -> tuple[list[float], list[int]]:
    """Times (since the first request) at which the bound count steps up, and the counts."""
    sent = [s for s in columns.sent if s is not None and not math.isnan(s)]
    start = min(sent, default=0.0)
    times = sorted(b - start for b in columns.bound if b is not None)
    return times, list(range(1, len(times) + 1))
