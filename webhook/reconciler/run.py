"""`placement-webhook reconcile`: the decision core without the admission webhook.

For setups without `serve` (the scheduler-extender overlay): the same
informers, view, Lease and fallback binder as a `serve` replica, plus a small
HTTP endpoint for probes, metrics and /debug/conflicts. It contends for the
same decision Lease as `serve`, so the two never decide at once.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import Any

from webhook.kube import Kube
from webhook.policy.policy_file import Policy
from webhook.reconciler.core import DecisionCore
from webhook.reconciler.election import ElectionSettings
from webhook.reconciler.endpoints import Endpoints
from webhook.reconciler.queue import BackoffSettings
from webhook.reconciler.settings import ReconcileSettings, default_identity
from webhook.serving.endpoints import (
    EndpointServer,
    MetricsSettings,
    check_metrics_settings,
    metrics_server,
)

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ entry point


def settings_from_args(args: argparse.Namespace, **extra: Any) -> ReconcileSettings:
    try:
        election = ElectionSettings(args.lease_duration, args.renew_deadline, args.retry_period)
        backoff = BackoffSettings(args.initial_backoff, args.max_backoff, args.max_unschedulable)
    except ValueError as err:
        raise SystemExit(f"placement-webhook reconcile: {err}") from None
    return ReconcileSettings(
        identity=args.identity or default_identity(),
        lease_namespace=args.namespace,
        lease_name=args.lease_name,
        election=election,
        backoff=backoff,
        bind_workers=max(1, args.bind_workers),
        conflict_interval=args.conflict_interval,
        max_cache_age=args.max_cache_age,
        bind=args.bind,
        metrics=MetricsSettings(
            bind=args.metrics_bind,
            auth=args.metrics_auth,
            certfile=getattr(args, "metrics_tls_cert", None),  # serve: its own TLS pair
            keyfile=getattr(args, "metrics_tls_key", None),
        ),
        pod_condition=not args.no_pod_condition,
        **extra,
    )


def run(client: Kube, policy: Policy, settings: ReconcileSettings) -> int:
    """Run until SIGTERM/SIGINT; stop binding, release the lease, return 0."""
    core = DecisionCore(client, policy, settings)
    endpoints = Endpoints(
        ready=core.readiness,
        registry=core.binder.metrics.registry,
        conflicts=core.binder.reporter.as_json,
        before_scrape=core.binder.refresh_gauges,
    )
    try:
        check_metrics_settings(settings.metrics, has_client=True)
        server = EndpointServer(settings.bind, endpoints.probes, name="probes")
        metrics = metrics_server(settings.metrics, endpoints.protected, client, name="metrics")
    except (OSError, ValueError) as err:
        raise SystemExit(f"placement-webhook reconcile: endpoints: {err}") from None
    done = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal %d: stopping", signum)
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    if metrics is not None:
        metrics.start()
    core.start()
    log.info(
        "reconciler started", extra={"identity": settings.identity, "endpoint": server.port,
                                      "lease": f"{settings.lease_namespace}/{settings.lease_name}",
                                      "conflictPolicy": policy.placement.conflict_policy},
    )  # fmt: skip
    done.wait()
    core.stop()
    server.stop()
    if metrics is not None:
        metrics.stop()
    return 0


def run_from_args(args: argparse.Namespace, policy: Policy) -> int:
    return run(Kube(args.kubeconfig), policy, settings_from_args(args))
