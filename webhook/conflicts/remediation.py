"""What `conflictPolicy: evict` may evict. Pure.

Only an Overcommit culprit (a pod the kubelet would reject, in arrival
order), only when this webhook placed it (we undo our own mistakes, never
another scheduler's decision), and only when a controller that recreates
pods owns it (ReplicaSet, ReplicationController, StatefulSet, Job): the
replacement goes through placement again and lands where there is room.
Eviction (policy/v1) rather than delete, so PodDisruptionBudgets hold.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from webhook.conflicts.model import OVERCOMMIT, RECREATING_CONTROLLERS, WEBHOOK, Conflict, PodRef

__all__ = ["EvictionTarget", "eviction_targets", "why_not_evictable"]


@dataclass(frozen=True)
class EvictionTarget:
    pod: PodRef
    conflict: Conflict


def why_not_evictable(pod: PodRef) -> str | None:
    """None when evict mode may evict `pod`, else the reason it may not."""
    if pod.placed_by != WEBHOOK:
        return f"placed by {pod.placed_by}, not by this webhook"
    if pod.owner is None:
        return "no controller owns it (nothing would recreate it)"
    if pod.owner.kind not in RECREATING_CONTROLLERS:
        return f"its controller {pod.owner.kind} does not recreate it elsewhere"
    return None


def eviction_targets(
    conflicts: Iterable[Conflict], *, skip: Collection[str] = ()
) -> list[EvictionTarget]:
    """Culprits of overcommits that evict mode evicts; `skip` holds uids already evicted."""
    out: list[EvictionTarget] = []
    seen: set[str] = set(skip)
    for conflict in conflicts:
        if conflict.kind != OVERCOMMIT:
            continue
        for pod in conflict.culprits:
            if pod.uid in seen or why_not_evictable(pod) is not None:
                continue
            seen.add(pod.uid)
            out.append(EvictionTarget(pod, conflict))
    return out
