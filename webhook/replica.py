"""One `placement-webhook serve` replica as deployed: the admission app on the decision core.

Every replica keeps a warm view (informers), answers `/mutate`, and contends
for the decision Lease. The holder decides admissions *and* runs the fallback
binder against one view and one reservation ledger (webhook.reconciler.core);
the others forward each review of a pod that is ours to it and relay its
answer, or hand the pod to the fallback binder when it cannot answer in time
(webhook.admission.forward). So at any moment one process decides for the
whole cluster, however many replicas the Deployment runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from flask import Flask

from webhook.admission.app import create_app
from webhook.admission.forward import Forwarder, PeerSettings
from webhook.admission.placement import Placer, PlacerSettings
from webhook.admission.server import ServeSettings, scheduled_announcer, start_endpoints
from webhook.kube import Kube
from webhook.policy.policy_file import Policy
from webhook.reconciler.core import DecisionCore
from webhook.reconciler.settings import ReconcileSettings
from webhook.serving.memory import freeze_periodically

log = logging.getLogger(__name__)


@dataclass
class Replica:
    """The parts of a running replica, for the server's lifecycle hooks."""

    core: DecisionCore
    forwarder: Forwarder
    app: Flask

    def stop(self) -> None:
        """Stop deciding, finish in-flight binds, release the Lease (the worker is exiting)."""
        self.forwarder.close()
        self.core.stop()


def build_replica(
    client: Kube,
    policy: Policy,
    placer_settings: PlacerSettings,
    core_settings: ReconcileSettings,
    peers: PeerSettings,
    serve: ServeSettings,
) -> Replica:
    """Start the decision core, the probe and metrics endpoints, and make the app.

    Called inside the gunicorn worker, after the fork.
    """
    core = DecisionCore(client, policy, core_settings)
    core.view.on_fulfilled = scheduled_announcer(client, policy.placement)
    core.start()
    placer = Placer(core.view, policy, placer_settings, ready=core.synced)
    forwarder = Forwarder(peers, maxsize=serve.threads)
    app = create_app(
        placer,
        router=core.authority.route,
        forwarder=forwarder,
        is_leader=core.authority.may_decide,
        extra_registries=(core.binder.metrics.registry,),
        conflicts=core.binder.reporter.as_json,
        before_scrape=core.binder.refresh_gauges,
    )
    start_endpoints(app, serve, client)
    freeze_periodically()
    log.info(
        "replica started",
        extra={
            "identity": core_settings.identity,
            "lease": f"{core_settings.lease_namespace}/{core_settings.lease_name}",
            "advertise": core_settings.advertise_url,
            "mode": policy.placement.mode,
        },
    )
    return Replica(core, forwarder, app)
