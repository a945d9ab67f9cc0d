"""The reconcile process's pages, served by the shared endpoint component (webhook.serving).

Probe endpoint (plain HTTP, for the kubelet):
GET /healthz          200 while the process runs (liveness)
GET /readyz           200 once the view is synced and fresh, 503 before; JSON
                      says whether this replica leads and who holds the lease
Metrics endpoint (HTTPS, callers authorized by the API server):
GET /metrics          Prometheus text format
GET /debug/conflicts  the conflicts standing at the last detection pass, JSON

Standbys are ready too: readiness says the cache is usable, leadership is
reported, not required (a standby must stay in the Service to take over).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from webhook.serving.endpoints import JSON, Page


class Endpoints:
    """What the pages read; each a callable so the pages hold no state of their own."""

    def __init__(
        self,
        *,
        ready: Callable[[], tuple[bool, dict[str, Any]]],
        registry: CollectorRegistry,
        conflicts: Callable[[], dict[str, Any]],
        before_scrape: Callable[[], None] = lambda: None,
    ):
        self.ready, self.registry, self.conflicts = ready, registry, conflicts
        self.before_scrape = before_scrape

    def _healthz(self) -> tuple[int, str, bytes]:
        return 200, JSON, b'{"status":"ok"}'

    def _readyz(self) -> tuple[int, str, bytes]:
        ok, info = self.ready()
        body = orjson.dumps({"status": "ok" if ok else "not ready", **info})
        return (200 if ok else 503), JSON, body

    def _metrics(self) -> tuple[int, str, bytes]:
        self.before_scrape()
        return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)

    def _conflicts(self) -> tuple[int, str, bytes]:
        return 200, JSON, orjson.dumps(self.conflicts())

    @property
    def probes(self) -> dict[str, Page]:
        return {"/healthz": self._healthz, "/readyz": self._readyz}

    @property
    def protected(self) -> dict[str, Page]:
        return {"/metrics": self._metrics, "/debug/conflicts": self._conflicts}

    def route(self, path: str) -> tuple[int, str, bytes]:
        """The page at `path` (either endpoint's), as the servers answer it."""
        page = {**self.probes, **self.protected}.get(path.split("?", 1)[0])
        if page is None:
            return 404, JSON, b'{"status":"not found"}'
        return page()
