"""Prometheus metrics of the admission path, on a registry of the app's own.

Buckets are fine below 5 ms, where a healthy decision lives, and reach to the
webhook timeout, where an unhealthy one ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01,
    0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0,
)  # fmt: skip


@dataclass
class AdmissionMetrics:
    registry: CollectorRegistry
    decision_seconds: Histogram
    decisions: Counter
    bad_requests: Counter
    reservations: Gauge
    cache_age: Gauge
    cache_synced: Gauge
    nodes: Gauge
    routes: Counter
    forward_seconds: Histogram
    reservations_ended: Gauge
    leader: Gauge
    _children: dict[tuple[int, tuple[str, ...]], Any] = field(
        default_factory=dict, repr=False, compare=False
    )

    def child(self, metric: MetricWrapperBase, *labels: str) -> Any:
        """`metric.labels(*labels)`, looked up once per label set and kept: `labels()`
        validates and locks on every call, a cost on every admission. Every label
        value here is a fixed word (results, reasons, routes, statuses), so the
        children are few."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children.setdefault(key, metric.labels(*labels))
        return found

    @classmethod
    def create(cls) -> AdmissionMetrics:
        registry = CollectorRegistry()
        return cls(
            registry=registry,
            decision_seconds=Histogram(
                "placement_webhook_decision_seconds",
                "Time from parsed AdmissionReview to response, by result.",
                ["result"],
                buckets=LATENCY_BUCKETS,
                registry=registry,
            ),
            decisions=Counter(
                "placement_webhook_decisions",
                "Admission decisions by result and reason (reasons are bounded in number).",
                ["result", "reason"],
                registry=registry,
            ),
            bad_requests=Counter(
                "placement_webhook_bad_requests",
                "Requests answered with a 4xx error, by HTTP status.",
                ["status"],
                registry=registry,
            ),
            reservations=Gauge(
                "placement_webhook_reservations",
                "Placements counted in the cache whose pod the watch has not yet delivered.",
                registry=registry,
            ),
            cache_age=Gauge(
                "placement_webhook_cache_age_seconds",
                "Seconds since the slowest watch last showed a sign of life.",
                registry=registry,
            ),
            cache_synced=Gauge(
                "placement_webhook_cache_synced",
                "1 once nodes, pods and namespaces have been listed.",
                registry=registry,
            ),
            nodes=Gauge("placement_webhook_nodes", "Nodes in the cache.", registry=registry),
            routes=Counter(
                "placement_webhook_routes",
                "Reviews of pods that are ours, by route: decided here, forwarded to the "
                "leader (answered or not), or handed to the fallback binder.",
                ["route"],
                registry=registry,
            ),
            forward_seconds=Histogram(
                "placement_webhook_forward_seconds",
                "Round trip of a review forwarded to the leading replica (answered ones).",
                buckets=LATENCY_BUCKETS,
                registry=registry,
            ),
            reservations_ended=Gauge(
                "placement_webhook_reservations_ended",
                "Reservations that ended, by how: fulfilled (the pod arrived), released "
                "(the decision failed), expired (no pod within the caller's timeout plus grace).",
                ["how"],
                registry=registry,
            ),
            leader=Gauge(
                "placement_webhook_leader",
                "1 while this replica holds the decision Lease and decides.",
                registry=registry,
            ),
        )
