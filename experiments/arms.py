"""The arms of the comparison: which components place the pods. Pure.

- ceiling: no webhook, no scheduler: raw pod-create throughput, the most any
  arm can bind (every arm creates the pods the same way first).
- A: kube-scheduler alone.
- B: the webhook in nodeName mode, no scheduler: the pod is bound when the
  create returns.
- C: the webhook in nodeAffinity mode pins the node, kube-scheduler checks
  and binds.
- D: kube-scheduler + the extender (nodeCacheCapable: node names only, the
  extender decides from its own watched cache; it also binds).
- E: the same with nodeCacheCapable false: every call carries the candidate
  Node objects.
- F: arm B with the webhook stopped part way (failurePolicy Ignore lets pods
  through unplaced) and restarted; once it holds the Lease again its fallback
  binder places what was left pending (one decision authority: no separate
  reconciler, which could never take the Lease the webhook holds).
- B0: arm B as it was before issue 13's settings (no topology labels, so the
  API server calls the webhook twice per pod): the before of a side-by-side run.
- BL: arm B, lean: minimal decision annotations and no Scheduled events.
- BE: arm B without Scheduled events only (BL's two settings apart).
- B2: arm B as deployed: two replicas behind a round-robin balancer; the one
  holding the Lease decides, the other forwards its half of the reviews.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Arm:
    key: str
    title: str
    scheduler: bool = False
    webhook: str | None = None
    """Placement mode of the admission webhook (nodeName | nodeAffinity), None: no webhook."""
    extender: bool = False
    node_cache_capable: bool = True
    outage: bool = False
    placement: tuple[tuple[str, Any], ...] = ()
    """PlacementPolicy fields of the webhook beyond its mode (the arm's settings)."""
    replicas: int = 1
    """Webhook replicas (more than one: behind the dev cluster's balancer)."""

    @property
    def binds(self) -> bool:
        """Whether anything in this arm binds pods (the ceiling binds nothing)."""
        return self.scheduler or self.webhook is not None


ARMS = {
    arm.key: arm
    for arm in (
        Arm("ceiling", "raw create ceiling (no webhook, no scheduler)"),
        Arm("A", "kube-scheduler", scheduler=True),
        Arm("B", "webhook nodeName", webhook="nodeName"),
        Arm("C", "webhook nodeAffinity + kube-scheduler", scheduler=True, webhook="nodeAffinity"),
        Arm("D", "kube-scheduler + extender (nodeCacheCapable)", scheduler=True, extender=True),
        Arm(
            "E",
            "kube-scheduler + extender (node objects)",
            scheduler=True,
            extender=True,
            node_cache_capable=False,
        ),
        Arm(
            "F",
            "webhook nodeName, outage, then its fallback binder",
            webhook="nodeName",
            outage=True,
        ),
        Arm(
            "B0",
            "webhook nodeName, no topology labels (called twice per pod)",
            webhook="nodeName",
            placement=(("copyTopologyLabels", False),),
        ),
        Arm(
            "B2", "webhook nodeName, two replicas behind a balancer", webhook="nodeName", replicas=2
        ),
        Arm(
            "BE",
            "webhook nodeName, no Scheduled events",
            webhook="nodeName",
            placement=(("scheduledEvents", False),),
        ),
        Arm(
            "BL",
            "webhook nodeName, minimal annotations, no Scheduled events",
            webhook="nodeName",
            placement=(("decisionAnnotations", "minimal"), ("scheduledEvents", False)),
        ),
    )
}
