"""The webhook's own settings: a `placement-webhook.io/v1alpha1` PlacementPolicy document.

What kube-scheduler has no field for lives here, in a type of its own
(`PlacementSettings`), not in a scheduling profile: how a decision is written
on the pod (`mode`), which profile places the webhook's pods
(`schedulerName`), how long a reservation waits for its pod
(`reservationGraceSeconds`), how much of the cluster unconfirmed reservations
may hold (`maxUnconfirmedShare`), what to do about an overcommitted node
(`conflictPolicy`), and what a placement costs the cluster besides the
decision: how much of it the pod carries (`decisionAnnotations`), whether a
`Scheduled` event is written (`scheduledEvents`) and whether the node's
topology labels are copied onto the pod (`copyTopologyLabels`). The
choices are enums, so a misspelt mode is a start-up error and a comparison
with a string that is not a mode cannot compile past mypy.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from webhook.policy.marks import DEFAULT_SCHEDULER
from webhook.policy.policy_yaml import Document

__all__ = [
    "PLACEMENT_API",
    "ConflictPolicy",
    "DecisionDetail",
    "Mode",
    "PlacementSettings",
    "placement_settings",
]

PLACEMENT_API: Final = "placement-webhook.io/v1alpha1"


class Mode(enum.StrEnum):
    """How a decision is written on the pod."""

    NODE_NAME = "nodeName"
    """spec.nodeName: no scheduler, no binding write (the kubelet is the only check after us)."""
    NODE_AFFINITY = "nodeAffinity"
    """A node affinity on metadata.name: the default scheduler still checks and binds."""


class ConflictPolicy(enum.StrEnum):
    """What the conflict detector does with a node it finds overcommitted."""

    REPORT = "report"
    """An event, a metric and an entry in /debug/conflicts."""
    EVICT = "evict"
    """Reported, and the last-arrived pod we placed is evicted when a controller recreates it."""


class DecisionDetail(enum.StrEnum):
    """How much of a decision each pod carries into etcd and every watcher."""

    FULL = "full"
    """kube-scheduler-simulator's per-node filter and score results."""
    SUMMARY = "summary"
    """The selected node, the filter histogram and the winning scores."""
    MINIMAL = "minimal"
    """Only the marks the webhook itself needs (reservation, selected node)."""


@dataclass(frozen=True)
class PlacementSettings:
    mode: Mode = Mode.NODE_NAME
    scheduler_name: str = DEFAULT_SCHEDULER
    """Profile used for pods with schedulerName "", default-scheduler or placement-webhook
    (webhook.policy.policy_file says how it is chosen when the document names none)."""
    reservation_grace_seconds: float = 3.0
    """How long past its caller's timeout (the API server's webhook timeout, a
    bind request's) a reservation waits for its pod before giving the slot back."""
    max_unconfirmed_share: float = 0.5
    """The largest share of the cluster's cpu, memory or pod slots that
    reservations whose pods have not appeared yet may hold at once."""
    conflict_policy: ConflictPolicy = ConflictPolicy.REPORT
    decision_annotations: DecisionDetail = DecisionDetail.SUMMARY
    scheduled_events: bool = True
    """Write kube-scheduler's `Scheduled` event for each pod placed by nodeName."""
    copy_topology_labels: bool = True
    """In nodeName mode, copy the node's zone and region labels onto the pod, as the
    API server's PodTopologyLabels admission does after us (its change otherwise
    makes the API server call the webhook a second time for every pod)."""


_FIELDS: Final = frozenset(
    {
        "apiVersion",
        "kind",
        "metadata",
        "mode",
        "schedulerName",
        "reservationTTLSeconds",
        "reservationGraceSeconds",
        "maxUnconfirmedShare",
        "conflictPolicy",
        "decisionAnnotations",
        "scheduledEvents",
        "copyTopologyLabels",
    }
)


E = TypeVar("E", bound=enum.StrEnum)


def _choice(doc: Document, cfg: Mapping[str, Any], name: str, default: E) -> E:
    kind = type(default)
    value = cfg.get(name, default.value)
    try:
        return kind(value)
    except ValueError:
        allowed = " or ".join(m.value for m in kind)
        raise doc.error(name, f"must be {allowed}, got {value!r}") from None


def placement_settings(cfg: Mapping[str, Any], doc: Document) -> PlacementSettings:
    """The PlacementPolicy's settings (`schedulerName` stays the default when not given)."""
    doc.fields("", cfg, _FIELDS)
    mode = _choice(doc, cfg, "mode", Mode.NODE_NAME)
    sched = cfg.get("schedulerName", DEFAULT_SCHEDULER)
    if not isinstance(sched, str) or not sched:
        raise doc.error("schedulerName", "must be a non-empty string")
    if "reservationTTLSeconds" in cfg:
        raise doc.error(
            "reservationTTLSeconds",
            "was replaced by reservationGraceSeconds: a reservation now lasts its "
            "caller's timeout (the API server's webhook timeout) plus that grace",
        )
    grace = cfg.get("reservationGraceSeconds", 3)
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 < grace <= 60:
        raise doc.error("reservationGraceSeconds", f"must be a number in (0, 60], got {grace!r}")
    share = cfg.get("maxUnconfirmedShare", 0.5)
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
        raise doc.error("maxUnconfirmedShare", f"must be a number in (0, 1], got {share!r}")
    for name in ("scheduledEvents", "copyTopologyLabels"):
        if not isinstance(cfg.get(name, True), bool):
            raise doc.error(name, f"must be true or false, got {cfg[name]!r}")
    return PlacementSettings(
        mode=mode,
        scheduler_name=sched,
        reservation_grace_seconds=float(grace),
        max_unconfirmed_share=float(share),
        conflict_policy=_choice(doc, cfg, "conflictPolicy", ConflictPolicy.REPORT),
        decision_annotations=_choice(doc, cfg, "decisionAnnotations", DecisionDetail.SUMMARY),
        scheduled_events=bool(cfg.get("scheduledEvents", True)),
        copy_topology_labels=bool(cfg.get("copyTopologyLabels", True)),
    )
