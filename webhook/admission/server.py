"""`placement-webhook serve`: the Flask app under gunicorn over TLS.

One worker process so the cluster view and its reservations have a single
owner; threads serve requests concurrently and the view's lock makes their
decisions consistent. The worker is `BoundedWorker` (gthread's pool, but a
thread only ever sees a request that has fully arrived). With `client_ca`,
the webhook port requires and verifies a client certificate in the TLS
handshake. The view (and its watches), the probe endpoint and the metrics
endpoint are started in the worker after the fork, never in the arbiter.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from webhook.admission.app import create_app
from webhook.admission.placement import Placer, PlacerSettings
from webhook.admission.review import MAX_BODY_BYTES
from webhook.bodies import ObjectRef
from webhook.cluster.ledger import ADMISSION
from webhook.cluster.source import ClusterSource
from webhook.cluster.view import Reservation
from webhook.events import EventRecorder, EventSink, scheduled
from webhook.kube import Requester
from webhook.policy.placement_policy import Mode, PlacementSettings
from webhook.policy.policy_file import Policy
from webhook.serving.endpoints import EndpointServer, MetricsSettings, metrics_server
from webhook.serving.framing import FramingLimits
from webhook.serving.memory import freeze_periodically
from webhook.serving.tls import CertificateReloader
from webhook.serving.worker import BoundedWorker, ConnectionLimits

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeSettings:
    """Where and how the webhook listens."""

    bind: str = "0.0.0.0:8443"
    """host:port to listen on."""
    certfile: str = "tls/tls.crt"
    """Serving certificate (PEM); reloaded when it changes on disk."""
    keyfile: str = "tls/tls.key"
    """Private key of the serving certificate (PEM)."""
    threads: int = 8
    """Request threads in the single worker process."""
    timeout: int = 30
    """Seconds before gunicorn restarts a stuck worker."""
    access_log: bool = False
    """Log every HTTP request (the decision log already has one line per pod)."""
    client_ca: str | None = None
    """PEM bundle of the CAs whose client certificates may call the webhook port
    (the API server's, and the webhook's own for replicas); None: callers are
    not authenticated."""
    client_names: tuple[str, ...] = ()
    """A client certificate must carry one of these as CN or DNS SAN (empty: any
    certificate the bundle verifies)."""
    health_bind: str = "127.0.0.1:8081"
    """host:port of the plain-HTTP probe endpoint (/healthz, /readyz) for the kubelet."""
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    """The /metrics endpoint (HTTPS with the serving certificate, callers authorized)."""


def build_snapshot_app(
    source: ClusterSource,
    policy: Policy,
    placer_settings: PlacerSettings,
    *,
    settings: ServeSettings | None = None,
) -> Flask:
    """`serve --snapshot`: decide every review here, against a fixed view (no Lease).

    With `settings`, the probe and metrics endpoints are started too (metrics
    callers cannot be authorized without a cluster: `--metrics-auth none`).
    """
    view = source.start()
    app = create_app(Placer(view, policy, placer_settings, ready=source.ready))
    if settings is not None:
        start_endpoints(app, settings, None)
        freeze_periodically()
    return app


def scheduled_announcer(
    events: EventSink, placement: PlacementSettings
) -> Callable[[Mapping[str, Any], Reservation], None] | None:
    """A `Scheduled` event for each pod we placed by `spec.nodeName`, once the watch has it.

    In nodeAffinity mode the scheduler that binds the pod writes its own; the
    fallback binder writes its own too. PlacementPolicy `scheduledEvents: false`
    writes none: an event is one more API write per pod, and client-go's event
    correlator would not merge them (each is about a different pod).
    """
    if placement.mode is not Mode.NODE_NAME or not placement.scheduled_events:
        return None
    recorder = EventRecorder(events, instance=f"placement-webhook-{socket.gethostname()}")

    def announce(pod: Mapping[str, Any], reservation: Reservation) -> None:
        if reservation.origin != ADMISSION:
            return
        ref = ObjectRef.of(pod)
        recorder.record(scheduled(ref.namespace, ref.name, ref.uid, reservation.node))

    return announce


def start_endpoints(app: Flask, settings: ServeSettings, client: Requester | None) -> None:
    """The kubelet's probe endpoint (plain HTTP) and the authorized metrics endpoint."""
    pages = app.extensions["placement-webhook.pages"]
    probes = {path: pages[path] for path in ("/healthz", "/readyz")}
    EndpointServer(settings.health_bind, probes, name="probes").start()
    guarded = {path: pages[path] for path in ("/metrics", "/debug/conflicts") if path in pages}
    metrics = metrics_server(settings.metrics, guarded, client, name="metrics")
    if metrics is not None:
        metrics.start()


class WebhookServer(BaseApplication):  # type: ignore[misc]
    """gunicorn, configured in code rather than by a config file."""

    def __init__(
        self,
        settings: ServeSettings,
        load: Callable[[], Flask],
        *,
        on_exit: Callable[[], None] = lambda: None,
    ):
        self.settings = settings
        self._load = load
        self._on_exit = on_exit
        # Validate the certificate pair before forking: a bad pair stops start-up.
        self.reloader = CertificateReloader(
            settings.certfile, settings.keyfile, client_ca=settings.client_ca
        )
        super().__init__()

    def load_config(self) -> None:
        reloader = self.reloader
        options: dict[str, Any] = {
            "bind": self.settings.bind,
            "workers": 1,
            "worker_class": BoundedWorker.configured(
                ConnectionLimits(
                    framing=FramingLimits(max_body_bytes=MAX_BODY_BYTES),
                    client_names=self.settings.client_names,
                )
            ),
            "threads": self.settings.threads,
            "timeout": self.settings.timeout,
            "graceful_timeout": 10,
            "keepalive": 120,  # BoundedWorker keeps idle connections by its own deadline
            "certfile": str(Path(self.settings.certfile)),
            "keyfile": str(Path(self.settings.keyfile)),
            "ssl_context": lambda _conf, _factory: reloader.context(),
            "accesslog": "-" if self.settings.access_log else None,
            "errorlog": "-",
            "loglevel": os.environ.get("GUNICORN_LOG_LEVEL", "warning"),
            "proc_name": "placement-webhook",
            # gunicorn's control socket would live under $HOME, which a read-only
            # container does not have, and nothing here uses it.
            "control_socket_disable": True,
            "worker_exit": lambda _arbiter, _worker: self._on_exit(),
        }
        for key, value in options.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        return self._load()
