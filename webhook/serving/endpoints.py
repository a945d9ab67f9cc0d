"""A process's own small HTTP endpoints: health probes, and protected metrics and debug pages.

One component for `serve` and `reconcile` (controller-runtime's shape): a
probe endpoint in plain HTTP for the kubelet, which presents no client
certificate and no token, serving only `/healthz` and `/readyz`; and a
metrics endpoint over HTTPS where every page needs a caller the API server
vouches for (see `delegation.py`). Both are bound to the pod's address in
the manifests, never to 0.0.0.0.

Each connection gets a thread with a socket timeout (a stalled client is
dropped after `timeout` seconds, TLS handshake included), and at most
`max_connections` are served at once; the rest are closed on accept.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import orjson

import certs
from webhook.kube import Requester
from webhook.serving.delegation import DelegatedAuthorizer, Verdict
from webhook.serving.tls import CertificateReloader

log = logging.getLogger(__name__)

#: A page: no arguments, answers (status, content type, body).
Page = Callable[[], tuple[int, str, bytes]]
JSON = "application/json"


class Authorizer(Protocol):
    def check(self, authorization: str | None, path: str) -> Verdict: ...


def json_page(status: int, body: object) -> tuple[int, str, bytes]:
    return status, JSON, orjson.dumps(body)


class EndpointServer:
    """Pages on `host:port` from a daemon thread; HTTPS and per-page authorization when given."""

    def __init__(
        self,
        bind: str,
        pages: Mapping[str, Page],
        *,
        tls: Callable[[], ssl.SSLContext] | None = None,
        authorizer: Authorizer | None = None,
        name: str = "endpoints",
        timeout: float = 5.0,
        max_connections: int = 32,
    ):
        host, _, port = bind.rpartition(":")
        self.name = name
        self.server = _Server(
            (host.strip("[]") or "127.0.0.1", int(port)), _handler(pages, authorizer, timeout), tls,
            threading.BoundedSemaphore(max_connections),
        )  # fmt: skip
        self._thread = threading.Thread(target=self.server.serve_forever, name=name, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def scheme(self) -> str:
        return "https" if self.server.tls else "http"

    def start(self) -> EndpointServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        tls: Callable[[], ssl.SSLContext] | None,
        slots: threading.BoundedSemaphore,
    ):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.tls, self.slots = tls, slots
        super().__init__(address, handler)

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = super().get_request()
        if self.tls is not None:
            # The handshake runs on the first read, in the connection's thread, under its timeout.
            sock = self.tls().wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("endpoint connection from %s failed", client_address, exc_info=True)


def _handler(
    pages: Mapping[str, Page], authorizer: Authorizer | None, timeout: float
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            self.request.settimeout(timeout)  # the TLS handshake and every read and write
            super().setup()

        def do_GET(self) -> None:  # the stdlib's name
            path = self.path.split("?", 1)[0]
            page = pages.get(path)
            if page is None:
                self._send(*json_page(404, {"status": "not found", "path": path}))
                return
            if authorizer is not None:
                verdict = authorizer.check(self.headers.get("Authorization"), path)
                if verdict.status != 200:
                    self._send(*json_page(verdict.status, {"status": verdict.reason}))
                    return
            try:
                status, content_type, body = page()
            except Exception:
                log.exception("endpoint %s failed", path)
                status, content_type, body = json_page(503, {"status": "page failed"})
            self._send(status, content_type, body)

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # probes every few seconds would drown the log

    return Handler


@dataclass(frozen=True)
class MetricsSettings:
    """The metrics endpoint of a process (serve, reconcile)."""

    bind: str = "127.0.0.1:8082"
    """host:port; the pod's address in a cluster; empty: no metrics endpoint."""
    auth: str = "delegated"
    """delegated: HTTPS, bearer tokens reviewed by the API server (TokenReview) and
    `get` on the path authorized by it (SubjectAccessReview); none: plain HTTP for
    anyone who reaches the address (never on all interfaces)."""
    certfile: str | None = None
    """Serving certificate (PEM) for HTTPS; None: a self-signed one made at start-up."""
    keyfile: str | None = None


ALL_INTERFACES = ("", "0.0.0.0", "::", "[::]")


def check_bindable(bind: str) -> None:
    """OSError now, with the address in it, rather than a worker that fails to boot later."""
    host, _, port = bind.rpartition(":")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]") or "127.0.0.1", int(port)))
        except OSError as err:
            raise OSError(f"cannot listen on {bind}: {err.strerror}") from None


def check_metrics_settings(settings: MetricsSettings, *, has_client: bool) -> None:
    """ValueError for metrics that would be world-readable or cannot be authorized."""
    if not settings.bind:
        return
    if settings.auth == "none":
        if settings.bind.rpartition(":")[0] in ALL_INTERFACES:
            raise ValueError(
                f"metrics without authentication on all interfaces ({settings.bind}) would be "
                "world-readable: bind the pod's address, or use delegated authentication"
            )
    elif settings.auth != "delegated":
        raise ValueError(f"unknown metrics authentication {settings.auth!r}")
    elif not has_client:
        raise ValueError("delegated metrics authentication needs the API server")


def metrics_server(
    settings: MetricsSettings, pages: Mapping[str, Page], client: Requester | None, *, name: str
) -> EndpointServer | None:
    """The metrics endpoint as configured; ValueError for a configuration that would leak."""
    check_metrics_settings(settings, has_client=client is not None)
    if not settings.bind:
        return None
    host = settings.bind.rpartition(":")[0]
    if settings.auth == "none":
        return EndpointServer(settings.bind, pages, name=name)
    assert client is not None
    if settings.certfile and settings.keyfile:
        tls = CertificateReloader(settings.certfile, settings.keyfile).context
    else:
        tls = _self_signed(host)
    return EndpointServer(
        settings.bind, pages, tls=tls, authorizer=DelegatedAuthorizer(client), name=name
    )


def _self_signed(host: str) -> Callable[[], ssl.SSLContext]:
    """A throw-away serving pair, as controller-runtime's metrics server makes without one."""
    folder = tempfile.mkdtemp(prefix="placement-webhook-metrics-")
    ips = [host.strip("[]")] if host not in ALL_INTERFACES and _is_ip(host.strip("[]")) else []
    certs.ensure_serving_pair(folder, ["localhost", socket.gethostname()], ips or ["127.0.0.1"])
    reloader = CertificateReloader(f"{folder}/tls.crt", f"{folder}/tls.key")
    return reloader.context


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
