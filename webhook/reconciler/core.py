"""The decision core of one process: what `serve` and `reconcile` both run.

- informers (nodes, pods, namespaces) -> `Feed` -> the view (with the one
  reservation ledger), the conflict records, the fallback binder's queue;
- the elector holds or watches the decision Lease, publishing this
  process's address when it leads;
- the decision authority gates deciding on leadership and on a view that is
  fresh past the takeover (webhook.reconciler.authority);
- the fallback binder binds pending pods of ours while the authority allows.

`serve` adds the admission app on top (webhook.replica): it decides with the
same view and ledger, so an admission and a bind never take the same slot.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from webhook import bodies
from webhook.cluster.informer import Informer
from webhook.cluster.source import WATCHED
from webhook.cluster.view import ClusterView
from webhook.conflicts.store import ConflictStore
from webhook.kube import Kube
from webhook.policy.policy_file import Policy
from webhook.reconciler.authority import DecisionAuthority
from webhook.reconciler.election import LeaderElector, LeaseLock
from webhook.reconciler.fallback import FallbackBinder
from webhook.reconciler.settings import ReconcileSettings

log = logging.getLogger(__name__)


class DecisionCore:
    """Informers, view, elector, authority and fallback binder of one process."""

    def __init__(
        self,
        client: Kube,
        policy: Policy,
        settings: ReconcileSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.client, self.policy, self.settings = client, policy, settings
        self.view = ClusterView(
            clock=clock, max_unconfirmed_share=policy.placement.max_unconfirmed_share
        )
        self.store = ConflictStore()
        election = settings.election
        self.elector = LeaderElector(
            LeaseLock(
                client,
                settings.lease_namespace,
                settings.lease_name,
                timeout=max(1.0, election.renew_deadline / 2),
            ),
            settings.identity,
            election,
            on_started=self._started_leading,
            on_stopped=self._stopped_leading,
            advertise_url=settings.advertise_url,
        )
        self.authority = DecisionAuthority(
            self.elector,
            pod_resource_version=lambda: self.view.resource_version("Pod"),
            current_resource_version=self._current_resource_version,
            settings=settings.authority,
            own_url=settings.advertise_url,
            on_fresh=self._fresh,
            lease_margin=election.act_margin,
            clock=clock,
        )
        self.binder = FallbackBinder(
            client,
            policy,
            settings,
            view=self.view,
            store=self.store,
            may_act=self.authority.may_decide,
            is_leader=self.elector.is_leader,
            synced=self.synced,
            clock=clock,
        )
        feed = self.binder.feed()
        self.informers = [Informer(client, feed, kind, path) for kind, path in WATCHED]

    # ---- lifecycle -----------------------------------------------------
    def start(self) -> None:
        for informer in self.informers:
            informer.start()
        self.elector.start()
        self.binder.start()

    def stop(self) -> None:
        """Stop deciding at once, let in-flight binds finish, then release the Lease."""
        self.elector.stop(release=False)
        self.binder.stop()
        self.elector.release()
        for informer in self.informers:
            informer.stop()

    # ---- reading -------------------------------------------------------
    def synced(self) -> bool:
        return self.view.is_ready(self.settings.max_cache_age)

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        info = {
            "identity": self.settings.identity,
            "leader": self.elector.is_leader(),
            "deciding": self.authority.may_decide(),
            "holder": self.elector.holder(),
            "nodes": self.view.node_count(),
            "pending": self.binder.pending(),
        }
        return self.synced(), info

    # ---- leadership ----------------------------------------------------
    def _current_resource_version(self) -> str:
        """A consistent read of the pods collection's resourceVersion (one item, cheap)."""
        answer = self.client.request("GET", "/api/v1/pods", params={"limit": 1}, timeout=5.0)
        return bodies.list_meta(answer).get("resourceVersion") or ""

    def _started_leading(self) -> None:
        self.authority.started_leading()

    def _stopped_leading(self) -> None:
        self.authority.stopped_leading()
        self.binder.metrics.leader.set(0)

    def _fresh(self) -> None:
        self.binder.metrics.leader.set(1)
        self.binder.wake()
