"""`placement-webhook serve`: the Flask app under gunicorn over TLS.

One worker process (gthread) so the cluster view and its reservations have a
single owner; threads serve requests concurrently and the view's lock makes
their decisions consistent. The view (and its watches) is built in the worker
after the fork, never in the arbiter.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from webhook.admission.app import create_app
from webhook.admission.placement import Placer, PlacerSettings
from webhook.admission.tls import CertificateReloader
from webhook.cluster.ledger import ADMISSION
from webhook.cluster.source import ClusterSource
from webhook.cluster.view import Reservation
from webhook.events import EventRecorder, EventSink, scheduled
from webhook.policy.profile import Policy

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


def build_snapshot_app(
    source: ClusterSource, policy: Policy, placer_settings: PlacerSettings
) -> Flask:
    """`serve --snapshot`: decide every review here, against a fixed view (no Lease)."""
    view = source.start()
    return create_app(Placer(view, policy, placer_settings, ready=source.ready))


def scheduled_announcer(
    events: EventSink, mode: str
) -> Callable[[Mapping[str, Any], Reservation], None] | None:
    """A `Scheduled` event for each pod we placed by `spec.nodeName`, once the watch has it.

    In nodeAffinity mode the scheduler that binds the pod writes its own.
    """
    if mode != "nodeName":
        return None
    recorder = EventRecorder(events, instance=f"placement-webhook-{socket.gethostname()}")

    def announce(pod: Mapping[str, Any], reservation: Reservation) -> None:
        if reservation.origin != ADMISSION:
            return  # the fallback binder writes its own events
        meta = pod.get("metadata") or {}
        recorder.record(
            scheduled(meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""),
                      reservation.node)
        )  # fmt: skip

    return announce


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
        self.reloader = CertificateReloader(settings.certfile, settings.keyfile)
        super().__init__()

    def load_config(self) -> None:
        reloader = self.reloader
        options: dict[str, Any] = {
            "bind": self.settings.bind,
            "workers": 1,
            "worker_class": "gthread",
            "threads": self.settings.threads,
            "timeout": self.settings.timeout,
            "graceful_timeout": 10,
            "keepalive": 30,
            "certfile": str(Path(self.settings.certfile)),
            "keyfile": str(Path(self.settings.keyfile)),
            "ssl_context": lambda _conf, _factory: reloader.context(),
            "accesslog": "-" if self.settings.access_log else None,
            "errorlog": "-",
            "loglevel": os.environ.get("GUNICORN_LOG_LEVEL", "warning"),
            "proc_name": "placement-webhook",
            "worker_exit": lambda _arbiter, _worker: self._on_exit(),
        }
        for key, value in options.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        return self._load()
