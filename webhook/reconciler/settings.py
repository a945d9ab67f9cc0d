"""Settings of the decision core that `serve` and `reconcile` share (argparse-free)."""

from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass, field

from webhook.policy.marks import DEFAULT_NAMESPACE
from webhook.reconciler.authority import AuthoritySettings
from webhook.reconciler.election import ElectionSettings
from webhook.reconciler.options import DEFAULT_BIND, DEFAULT_LEASE_NAME
from webhook.reconciler.queue import BackoffSettings
from webhook.serving.endpoints import MetricsSettings


@dataclass(frozen=True)
class ReconcileSettings:
    """How the decision core runs (the policy is passed separately)."""

    identity: str
    """Lease holder identity; unique per process."""
    lease_namespace: str = DEFAULT_NAMESPACE
    """Namespace of the Lease (the webhook's own)."""
    lease_name: str = DEFAULT_LEASE_NAME
    """The decision Lease: every `serve` replica and every `reconcile` process of one
    installation must name the same one, or two of them will decide at once."""
    election: ElectionSettings = field(default_factory=ElectionSettings)
    authority: AuthoritySettings = field(default_factory=AuthoritySettings)
    backoff: BackoffSettings = field(default_factory=BackoffSettings)
    bind_workers: int = 4
    """Concurrent Binding requests."""
    conflict_interval: float = 2.0
    """Seconds between detection passes (a pass runs only when something changed)."""
    max_cache_age: float = 120.0
    """Seconds of watch silence after which the view is not trusted (not ready, no binds)."""
    bind: str = DEFAULT_BIND
    """host:port of the reconcile command's probe endpoint (plain HTTP, /healthz and /readyz)."""
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    """The reconcile command's metrics endpoint (/metrics, /debug/conflicts), callers authorized."""
    pod_condition: bool = True
    """Set PodScheduled=False/Unschedulable on pods that fit nowhere, as kube-scheduler does."""
    advertise_url: str = ""
    """Where this process answers forwarded admission reviews (serve only; "" for reconcile)."""


def default_identity() -> str:
    """host_uuid, as kube-scheduler and kube-controller-manager name themselves."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"
