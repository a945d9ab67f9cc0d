"""Prometheus metrics of the reconcile process, on a registry of its own."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

BIND_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
)  # fmt: skip


@dataclass
class ReconcilerMetrics:
    registry: CollectorRegistry
    leader: Gauge
    pending: Gauge
    attempts: Counter
    binds: Counter
    time_to_bind: Histogram
    reservations: Gauge
    cache_synced: Gauge
    nodes: Gauge

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> ReconcilerMetrics:
        registry = registry or CollectorRegistry()
        metrics = cls(
            registry=registry,
            leader=Gauge(
                "placement_webhook_reconciler_leader",
                "1 while this process holds the lease and may bind.",
                registry=registry,
            ),
            pending=Gauge(
                "placement_webhook_reconciler_pending_pods",
                "Pending pods of ours by queue (active, backoff, unschedulable, in-flight).",
                ["queue"],
                registry=registry,
            ),
            attempts=Counter(
                "placement_webhook_reconciler_schedule_attempts",
                "Scheduling attempts by result (scheduled, unschedulable, skipped, error).",
                ["result"],
                registry=registry,
            ),
            binds=Counter(
                "placement_webhook_reconciler_binds",
                "Binding requests by outcome (bound, already-bound, gone, error, not-leader).",
                ["outcome"],
                registry=registry,
            ),
            time_to_bind=Histogram(
                "placement_webhook_reconciler_time_to_bind_seconds",
                "From the moment the queue first saw a pending pod to its verified bind.",
                buckets=BIND_BUCKETS,
                registry=registry,
            ),
            reservations=Gauge(
                "placement_webhook_reconciler_reservations",
                "Placements counted in the view whose bound pod the watch has not yet delivered.",
                registry=registry,
            ),
            cache_synced=Gauge(
                "placement_webhook_reconciler_cache_synced",
                "1 once nodes, pods and namespaces have been listed.",
                registry=registry,
            ),
            nodes=Gauge(
                "placement_webhook_reconciler_nodes", "Nodes in the view.", registry=registry
            ),
        )
        for queue in ("active", "backoff", "unschedulable", "in-flight"):
            metrics.pending.labels(queue).set(0)
        return metrics
