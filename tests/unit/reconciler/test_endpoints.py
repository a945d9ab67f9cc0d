"""The reconcile process's HTTP routes."""

from __future__ import annotations

from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter

from webhook.reconciler.endpoints import Endpoints


def endpoints(ready: bool) -> Endpoints:
    registry = CollectorRegistry()
    Counter("things", "Things.", registry=registry).inc()
    info: dict[str, Any] = {"leader": False, "holder": "other"}
    return Endpoints(
        ready=lambda: (ready, info),
        registry=registry,
        conflicts=lambda: {"passes": 1, "conflicts": [{"kind": "Overcommit"}]},
    )


def test_health_is_always_ok_and_readiness_follows_the_cache() -> None:
    assert endpoints(False).route("/healthz")[0] == 200
    status, _, body = endpoints(False).route("/readyz")
    assert status == 503 and orjson.loads(body)["holder"] == "other"
    assert endpoints(True).route("/readyz")[0] == 200


def test_metrics_and_the_conflict_list_are_served() -> None:
    status, content_type, body = endpoints(True).route("/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    assert b"things_total 1.0" in body
    status, _, body = endpoints(True).route("/debug/conflicts?format=json")
    assert orjson.loads(body)["conflicts"] == [{"kind": "Overcommit"}]


def test_unknown_paths_are_not_found() -> None:
    assert endpoints(True).route("/nope")[0] == 404
