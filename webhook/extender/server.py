"""`placement-webhook extender`: the Flask app under gunicorn, over HTTP or HTTPS.

Served like the admission webhook, for the same reason: one gthread worker
owns the cluster view (and the pods it has bound but not yet seen), its
threads answer kube-scheduler's calls concurrently, and the view's lock keeps
their answers consistent. The view and its watches are built in the worker,
after the fork. kube-scheduler speaks either protocol (enableHTTPS); TLS is on
when a certificate pair is given.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from webhook.cluster.source import ClusterSource
from webhook.extender.app import create_app
from webhook.extender.ratelimit import TokenBucket
from webhook.extender.service import BindingClient, Extender
from webhook.extender.verdicts import Scoring
from webhook.policy.policy_file import Policy


@dataclass(frozen=True)
class ExtenderSettings:
    """Where and how the extender listens and decides."""

    bind: str = "0.0.0.0:8888"
    """host:port to listen on."""
    certfile: str | None = None
    """Serving certificate (PEM); with `keyfile`, serve HTTPS instead of HTTP."""
    keyfile: str | None = None
    """Private key of the serving certificate (PEM)."""
    threads: int = 8
    """Request threads in the single worker process."""
    timeout: int = 30
    """Seconds before gunicorn restarts a stuck worker."""
    scoring: Scoring = Scoring.DECISIVE
    """How policy totals become 0..10 extender priorities (see verdicts.py)."""
    kube_qps: float = 50.0
    """Binding writes per second (client-go's qps); <= 0: unlimited."""
    kube_burst: int = 100
    """Binding writes allowed in a burst (client-go's burst)."""
    bind_timeout: float = 30.0
    """Seconds a Binding request may take; a reservation waits that plus the
    policy's grace for the watch to deliver the bound pod."""

    @property
    def tls(self) -> bool:
        return bool(self.certfile and self.keyfile)


def build_app(
    source: ClusterSource,
    policy: Policy,
    settings: ExtenderSettings,
    binder: BindingClient | None,
) -> Flask:
    """Start the cluster view and make the app (called inside the worker, after the fork)."""
    view = source.start()
    extender = Extender(
        view,
        policy,
        binder=binder,
        scoring=settings.scoring,
        ready=source.ready,
        limiter=TokenBucket(settings.kube_qps, settings.kube_burst),
        bind_timeout=settings.bind_timeout,
    )
    return create_app(extender)


class ExtenderServer(BaseApplication):  # type: ignore[misc]
    """gunicorn, configured in code rather than by a config file."""

    def __init__(self, settings: ExtenderSettings, load: Callable[[], Flask]):
        self.settings = settings
        self._load = load
        super().__init__()

    def load_config(self) -> None:
        options: dict[str, Any] = {
            "bind": self.settings.bind,
            "workers": 1,
            "worker_class": "gthread",
            "threads": self.settings.threads,
            "timeout": self.settings.timeout,
            "graceful_timeout": 10,
            "keepalive": 30,
            "accesslog": None,
            "errorlog": "-",
            "loglevel": os.environ.get("GUNICORN_LOG_LEVEL", "warning"),
            "proc_name": "placement-webhook-extender",
            "control_socket_disable": True,  # it would live under $HOME; nothing uses it
        }
        if self.settings.tls:
            options["certfile"] = self.settings.certfile
            options["keyfile"] = self.settings.keyfile
        for key, value in options.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        return self._load()
