"""Prometheus text exposition: samples, deltas between two scrapes, histogram quantiles. Pure.

Every figure that comes from a component's /metrics is a difference between
a scrape just before the pods are created and one after they are bound, so
start-up work (informer lists, the probe pod) is not counted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

LabelSet = frozenset[tuple[str, str]]


@dataclass(frozen=True)
class Samples:
    """name -> {label set -> value}, every sample of a scrape (bucket/count/sum included)."""

    values: Mapping[str, Mapping[LabelSet, float]]

    @staticmethod
    def parse(text: str) -> Samples:
        out: dict[str, dict[LabelSet, float]] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
        return Samples(out)

    def select(self, metric: str, /, **labels: str) -> dict[LabelSet, float]:
        wanted = set(labels.items())
        return {k: v for k, v in self.values.get(metric, {}).items() if wanted <= k}

    def total(self, name: str, where: Callable[[Mapping[str, str]], bool] | None = None) -> float:
        return sum(
            v for k, v in self.values.get(name, {}).items() if where is None or where(dict(k))
        )


def delta(before: Samples, after: Samples, metric: str, /, **labels: str) -> dict[LabelSet, float]:
    """after - before for every label set of `metric` matching `labels` (missing before: 0)."""
    old = before.select(metric, **labels)
    return {k: v - old.get(k, 0.0) for k, v in after.select(metric, **labels).items()}


MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE", "APPLY"})


def api_writes(before: Samples, after: Samples) -> dict[str, int]:
    """Mutating API server requests between two scrapes (dry runs not), by resource[/sub]."""
    out: dict[str, int] = {}
    for labels, value in delta(before, after, "apiserver_request_total").items():
        info = dict(labels)
        if info.get("verb") not in MUTATING or info.get("dry_run"):
            continue
        resource = info.get("resource", "")
        if info.get("subresource"):
            resource += "/" + info["subresource"]
        out[resource] = out.get(resource, 0) + round(value)
    return out


@dataclass(frozen=True)
class Histogram:
    """One histogram's observations between two scrapes (label sets matching summed)."""

    buckets: tuple[tuple[float, float], ...]  # (upper bound, cumulative count), sorted
    count: float
    sum: float

    @staticmethod
    def between(before: Samples, after: Samples, metric: str, /, **labels: str) -> Histogram:
        per_bound: dict[float, float] = {}
        for k, v in delta(before, after, f"{metric}_bucket", **labels).items():
            bound = float(dict(k)["le"])
            per_bound[bound] = per_bound.get(bound, 0.0) + v
        count = sum(delta(before, after, f"{metric}_count", **labels).values())
        total = sum(delta(before, after, f"{metric}_sum", **labels).values())
        return Histogram(tuple(sorted(per_bound.items())), count, total)

    @property
    def mean(self) -> float:
        return self.sum / self.count if self.count else math.nan

    def quantile(self, q: float) -> float:
        """Prometheus' histogram_quantile: linear within the bucket holding rank q * count."""
        if not self.count or not self.buckets:
            return math.nan
        rank = q * self.count
        lower_bound, lower_count = 0.0, 0.0
        for bound, cumulative in self.buckets:
            if cumulative >= rank:
                if math.isinf(bound):
                    return lower_bound
                inside = cumulative - lower_count
                if inside <= 0:
                    return bound
                return lower_bound + (bound - lower_bound) * (rank - lower_count) / inside
            lower_bound, lower_count = bound, cumulative
        return lower_bound
