"""The reconcile process's own small HTTP endpoint (plain HTTP, for probes and scraping).

GET /healthz          200 while the process runs (liveness)
GET /readyz           200 once the view is synced and fresh, 503 before; JSON
                      says whether this replica leads and who holds the lease
GET /metrics          Prometheus text format
GET /debug/conflicts  the conflicts standing at the last detection pass, JSON

Standbys are ready too: readiness says the cache is usable, leadership is
reported, not required (a standby must stay in the Service to take over).
The standard library's threading server is enough for this traffic.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)


class Endpoints:
    """What the routes read; each a callable so the server holds no state of its own."""

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

    def route(self, path: str) -> tuple[int, str, bytes]:
        path = path.split("?", 1)[0]
        if path == "/healthz":
            return 200, "application/json", b'{"status":"ok"}'
        if path == "/readyz":
            ok, info = self.ready()
            body = orjson.dumps({"status": "ok" if ok else "not ready", **info})
            return (200 if ok else 503), "application/json", body
        if path == "/metrics":
            self.before_scrape()
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if path == "/debug/conflicts":
            return 200, "application/json", orjson.dumps(self.conflicts())
        return 404, "application/json", b'{"status":"not found"}'


class EndpointServer:
    """A ThreadingHTTPServer on `host:port` serving `Endpoints` from a daemon thread."""

    def __init__(self, bind: str, endpoints: Endpoints):
        host, _, port = bind.rpartition(":")
        handler = _handler(endpoints)
        self.server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="endpoints", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(endpoints: Endpoints) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the stdlib's name
            try:
                status, content_type, body = endpoints.route(self.path)
            except Exception:
                log.exception("endpoint %s failed", self.path)
                status, content_type, body = 500, "application/json", b'{"status":"error"}'
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # probes every few seconds would drown the log

    return Handler
