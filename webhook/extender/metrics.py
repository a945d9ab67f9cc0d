"""Prometheus metrics of the extender, on a registry of its own.

Per verb: calls by result, latency (fine below 5 ms, reaching kube-scheduler's
default 5 s extender timeout), nodes per call and bytes received, the last
two because a scheduler that is not node-cache-capable sends every candidate
Node object on every call, which is the cost the comparison measures.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)  # fmt: skip
NODE_BUCKETS = (1, 5, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


@dataclass
class ExtenderMetrics:
    registry: CollectorRegistry
    requests: Counter
    request_seconds: Histogram
    request_nodes: Histogram
    request_bytes: Counter
    binds: Counter
    assumed: Gauge
    nodes: Gauge
    cache_age: Gauge
    cache_synced: Gauge

    @classmethod
    def create(cls) -> ExtenderMetrics:
        registry = CollectorRegistry()
        return cls(
            registry=registry,
            requests=Counter(
                "placement_extender_requests",
                "Extender calls by verb (filter, prioritize, bind) and result.",
                ["verb", "result"],
                registry=registry,
            ),
            request_seconds=Histogram(
                "placement_extender_request_seconds",
                "Time from request body read to response, by verb.",
                ["verb"],
                buckets=LATENCY_BUCKETS,
                registry=registry,
            ),
            request_nodes=Histogram(
                "placement_extender_request_nodes",
                "Candidate nodes per filter/prioritize call.",
                ["verb"],
                buckets=NODE_BUCKETS,
                registry=registry,
            ),
            request_bytes=Counter(
                "placement_extender_request_bytes",
                "Request body bytes received, by verb.",
                ["verb"],
                registry=registry,
            ),
            binds=Counter(
                "placement_extender_binds",
                "Bindings written for kube-scheduler, by result.",
                ["result"],
                registry=registry,
            ),
            assumed=Gauge(
                "placement_extender_assumed_pods",
                "Pods bound by the extender that the watch has not delivered yet.",
                registry=registry,
            ),
            nodes=Gauge("placement_extender_nodes", "Nodes in the cache.", registry=registry),
            cache_age=Gauge(
                "placement_extender_cache_age_seconds",
                "Seconds since the slowest watch last showed a sign of life.",
                registry=registry,
            ),
            cache_synced=Gauge(
                "placement_extender_cache_synced",
                "1 once nodes, pods and namespaces have been listed.",
                registry=registry,
            ),
        )
