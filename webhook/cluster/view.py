"""The cached cluster view: a policy snapshot kept in sync, plus this process's reservations.

One lock guards the snapshot and the reservation ledger. A decision runs
`schedule` and records its reservation under that lock, so two decisions *of
this process* can never both take the last slot of a node. Across processes
that holds only because one process decides at a time (the Lease holder; see
webhook.replica). The ledger (webhook.cluster.ledger) says when a reservation
ends: when the watch delivers the pod carrying its key, when its decision
failed, or a few seconds after its caller's timeout.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from webhook import bodies
from webhook.bodies import ObjectRef
from webhook.cluster.ledger import ADMISSION, Ledger, Reservation
from webhook.policy.framework import Decision, schedule
from webhook.policy.marks import RESERVATION
from webhook.policy.model import NamespaceView, NodeView, PodView
from webhook.policy.profile import Profile
from webhook.policy.snapshot import ClusterSnapshot
from webhook.policy.status import Code
from webhook.policy.workloads import WORKLOAD_KINDS, WorkloadView, object_key

T = TypeVar("T")
Parsed = PodView | NodeView
"""A pod's or a node's view, parsed by the caller (the feed shares one parse)."""
# What the view is fed; the Services and controllers give default spreading its selectors.
KINDS = (
    "Node",
    "Pod",
    "Namespace",
    "Service",
    "ReplicationController",
    "ReplicaSet",
    "StatefulSet",
)

__all__ = ["KINDS", "ClusterView", "Placement", "Reservation", "SyncState"]


@dataclass(frozen=True)
class SyncState:
    synced: bool
    age_seconds: float  # since the last sign of life from the slowest watch


@dataclass(frozen=True)
class Placement:
    """A decision and what it holds."""

    decision: Decision
    reservation: Reservation | None = None
    """None for a dry run, when nothing was placed, or when held back."""
    held_back: str = ""
    """Why a placed decision was not reserved (and so must not be used), or ""."""

    @property
    def key(self) -> str | None:
        return self.reservation.key if self.reservation is not None else None


class ClusterView:
    """A thread-safe ClusterSnapshot with a reservation ledger and sync bookkeeping."""

    def __init__(
        self,
        snapshot: ClusterSnapshot | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        synced: bool = False,
        max_unconfirmed_share: float = 0.5,
    ):
        self._lock = threading.Lock()
        self._snapshot = snapshot or ClusterSnapshot()
        self._clock = clock
        self._ledger = Ledger(
            self._snapshot, clock=clock, max_unconfirmed_share=max_unconfirmed_share
        )
        #: Called (outside the lock) when the watch delivers a pod one of our reservations made.
        self.on_fulfilled: Callable[[Mapping[str, Any], Reservation], None] | None = None
        self._known: dict[str, set[str]] = {kind: set() for kind in KINDS}
        now = clock()
        self._listed: dict[str, bool] = {kind: synced for kind in KINDS}
        self._last_seen: dict[str, float] = {kind: now for kind in KINDS}
        self._resource_version: dict[str, str] = {kind: "" for kind in KINDS}

    # ---- feeding (informers) -------------------------------------------
    @staticmethod
    def _key(kind: str, obj: Mapping[str, Any]) -> str:
        """How the view knows an object: a pod by uid, a workload by namespace/name, the
        others by name."""
        if kind in WORKLOAD_KINDS:
            return object_key(obj)
        ref = ObjectRef.of(obj)
        return (ref.uid or ref.name) if kind == "Pod" else ref.name

    def _upsert(
        self, kind: str, obj: Mapping[str, Any], parsed: Parsed | None = None
    ) -> Reservation | None:
        """Store an object (`parsed`: its view, when the caller parsed it already); for a pod
        one of our reservations made, return that reservation."""
        fulfilled = None
        if kind == "Node":
            node = parsed if isinstance(parsed, NodeView) else NodeView.from_dict(obj)
            self._snapshot.upsert_node(node)
        elif kind == "Pod":
            pod = parsed if isinstance(parsed, PodView) else PodView.from_dict(obj)
            if pod.reservation and (pod.counted_node or pod.is_terminal or pod.is_terminating):
                fulfilled = self._ledger.fulfil(pod.reservation)
            self._snapshot.upsert_pod(pod)
        elif kind in WORKLOAD_KINDS:
            self._snapshot.workloads.upsert(WorkloadView.from_dict(kind, obj))
        else:
            self._snapshot.upsert_namespace(NamespaceView.from_dict(obj))
        self._known[kind].add(self._key(kind, obj))
        return fulfilled

    def _remove(self, kind: str, key: str, obj: Mapping[str, Any] | None = None) -> None:
        if kind == "Node":
            self._snapshot.remove_node(key)
        elif kind == "Pod":
            if obj is not None:
                reservation = _reservation_key(obj)
                if reservation:
                    self._ledger.release(reservation)
            self._snapshot.remove_pod(key)
        elif kind in WORKLOAD_KINDS:
            self._snapshot.workloads.remove(kind, key)
        else:
            self._snapshot.remove_namespace(key)
        self._known[kind].discard(key)

    def replace(
        self,
        kind: str,
        pages: Iterable[list[Mapping[str, Any]]],
        parsed: Callable[[Mapping[str, Any]], Parsed | None] | None = None,
    ) -> int:
        """A full list, page by page: upsert every object, then drop those that are gone.

        The lock is taken per page, so decisions go on during a long re-list
        (against a view that is a mix of the old and the new list, as any
        watch-fed cache is for a moment); raw pages are freed as they go.
        `parsed(obj)` gives an object's view when the caller parsed it already
        (the reconciler's feed: one parse for the view and the conflict store).
        """
        seen: set[str] = set()
        fulfilled: list[tuple[Mapping[str, Any], Reservation]] = []
        for page in pages:
            with self._lock:
                for obj in page:
                    reservation = self._upsert(kind, obj, parsed(obj) if parsed else None)
                    if reservation is not None:
                        fulfilled.append((obj, reservation))
                    seen.add(self._key(kind, obj))
        with self._lock:
            for gone in self._known[kind] - seen:
                self._remove(kind, gone)
            self._listed[kind] = True
            self._last_seen[kind] = self._clock()
        self._announce(fulfilled)
        return len(seen)

    def apply(
        self, kind: str, event: str, obj: Mapping[str, Any], parsed: Parsed | None = None
    ) -> None:
        """One watch event (`parsed`: the object's view, when the caller parsed it already)."""
        fulfilled = None
        with self._lock:
            if event == "DELETED":
                self._remove(kind, self._key(kind, obj), obj)
            else:
                fulfilled = self._upsert(kind, obj, parsed)
            self._last_seen[kind] = self._clock()
            version = bodies.resource_version(obj)
            if version:
                self._resource_version[kind] = version
        if fulfilled is not None:
            self._announce([(obj, fulfilled)])

    def touch(self, kind: str, resource_version: str = "") -> None:
        """A sign of life from a watch (a bookmark, a normal close, a finished list)."""
        with self._lock:
            self._last_seen[kind] = self._clock()
            if resource_version:
                self._resource_version[kind] = resource_version

    def _announce(self, fulfilled: list[tuple[Mapping[str, Any], Reservation]]) -> None:
        if self.on_fulfilled is not None:
            for obj, reservation in fulfilled:
                self.on_fulfilled(obj, reservation)

    # ---- reading -------------------------------------------------------
    @property
    def clock(self) -> Callable[[], float]:
        """The clock reservations and deadlines are measured on."""
        return self._clock

    def sync_state(self, kinds: Iterable[str] = KINDS) -> SyncState:
        with self._lock:
            now = self._clock()
            kinds = list(kinds)
            synced = all(self._listed[k] for k in kinds)
            age = max(now - self._last_seen[k] for k in kinds)
        return SyncState(synced=synced, age_seconds=age)

    def is_ready(self, max_age_seconds: float) -> bool:
        """Whether decisions against this view can be trusted: every collection
        was listed, and every watch gave a sign of life within `max_age_seconds`."""
        state = self.sync_state()
        return state.synced and state.age_seconds <= max_age_seconds

    def resource_version(self, kind: str) -> str:
        """The newest resourceVersion the watch of `kind` delivered ("" before any)."""
        with self._lock:
            return self._resource_version[kind]

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        """Labels of a namespace the view knows, or None when it does not know it."""
        with self._lock:
            if name not in self._known["Namespace"]:
                return None
            return dict(self._snapshot.namespace_labels(name))

    def node_labels(self, name: str, keys: Iterable[str]) -> dict[str, str]:
        """Those of `keys` that node `name` carries, with their values ({} for an unknown node)."""
        with self._lock:
            node = self._snapshot.node(name)
            if node is None:
                return {}
            return {k: node.labels[k] for k in keys if k in node.labels}

    def reservations(self) -> list[Reservation]:
        with self._lock:
            return list(self._ledger)

    def reservation(self, key: str) -> Reservation | None:
        with self._lock:
            return self._ledger.get(key)

    def ledger_counts(self) -> dict[str, int]:
        """How reservations ended so far, and how many are open (for metrics)."""
        with self._lock:
            ledger = self._ledger
            return {
                "open": len(ledger),
                "fulfilled": ledger.fulfilled,
                "released": ledger.released,
                "expired": ledger.expired,
            }

    def node_count(self) -> int:
        with self._lock:
            return len(self._snapshot)

    def evaluate(self, fn: Callable[[ClusterSnapshot], T]) -> T:
        """Run `fn` on the snapshot under the lock (the extender's reads).

        `fn` must not keep the snapshot: it changes as soon as the lock is released.
        """
        with self._lock:
            self._ledger.expire()
            return fn(self._snapshot)

    # ---- placing -------------------------------------------------------
    def place(
        self,
        pod: PodView,
        profile: Profile,
        *,
        hold_for: float | None,
        seed: str | None = None,
        origin: str = ADMISSION,
        key: str | None = None,
        give_up_at: float | None = None,
    ) -> Placement:
        """Decide for `pod`; when placed and `hold_for` is set, reserve the node that long.

        `seed` breaks ties between equally good nodes (the admission request
        uid: pods of one ReplicaSet have no name or uid yet at admission).
        `key` reuses a reservation key (a re-check of a pod that carries
        one). With `give_up_at` (the caller's deadline on this view's clock),
        a decision that could only start after it is not made at all.
        """
        with self._lock:
            self._ledger.expire()
            if give_up_at is not None and self._clock() >= give_up_at:
                late = Decision(None, Code.Skip, "the caller's deadline passed before a decision")
                return Placement(late, held_back="deadline")
            if key is not None:
                self._ledger.release(key)  # the pod is decided afresh, not counted twice
            decision = schedule(pod, self._snapshot, profile, seed=seed)
            if not decision.placed or decision.node is None or hold_for is None:
                return Placement(decision)
            if not self._ledger.admits(pod, origin):
                return Placement(decision, held_back="unconfirmed-share")
            reservation = self._ledger.reserve(
                key or uuid.uuid4().hex, pod, decision.node, hold_for=hold_for, origin=origin
            )
            return Placement(decision, reservation)

    def recheck(
        self,
        pod: PodView,
        profile: Profile,
        node: str,
        *,
        key: str,
        hold_for: float | None,
        seed: str | None = None,
        give_up_at: float | None = None,
    ) -> Placement:
        """Re-decide a pod we placed on `node` after a later webhook changed it.

        `pod` is the changed pod without our placement. Its old reservation is
        not counted while it is checked. When it still fits `node`, `node` is
        kept (the reservation now counts the changed pod); otherwise the
        policy places it afresh, on another node or on none.
        """
        with self._lock:
            self._ledger.expire()
            if give_up_at is not None and self._clock() >= give_up_at:
                late = Decision(None, Code.Skip, "the caller's deadline passed before a re-check")
                return Placement(late, held_back="deadline")
            if hold_for is None:  # a dry run changes nothing, not even the old reservation
                with self._ledger.suspended(key):
                    return Placement(self._recheck_locked(pod, profile, node, seed))
            self._ledger.release(key)
            decision = self._recheck_locked(pod, profile, node, seed)
            if not decision.placed or decision.node is None:
                return Placement(decision)
            if decision.node != node and not self._ledger.admits(pod):
                return Placement(decision, held_back="unconfirmed-share")
            reservation = self._ledger.reserve(
                key, pod, decision.node, hold_for=hold_for, origin=ADMISSION
            )
            return Placement(decision, reservation)

    def _recheck_locked(
        self, pod: PodView, profile: Profile, node: str, seed: str | None
    ) -> Decision:
        on_node = schedule(replace(pod, node_name=node), self._snapshot, profile, seed=seed)
        return on_node if on_node.placed else schedule(pod, self._snapshot, profile, seed=seed)

    def stranded(self, uid: str, pod: PodView, profile: Profile, node: str) -> str | None:
        """For a pending pod pinned to `node`: another node that fits it, if `node` does not.

        `pod` is the pod without our pin. The pinned pod itself is left out of
        the count while it is checked (it counts on `node` as long as it waits).
        """
        with self._lock:
            counted = self._snapshot.pod(uid)
            if counted is not None:
                self._snapshot.remove_pod(uid)
            try:
                on_node = schedule(replace(pod, node_name=node), self._snapshot, profile)
                if on_node.placed:
                    return None
                elsewhere = schedule(pod, self._snapshot, profile)
                return elsewhere.node if elsewhere.placed else None
            finally:
                if counted is not None:
                    self._snapshot.upsert_pod(counted)

    def reserve(
        self, pod: PodView, node: str, *, hold_for: float, origin: str, key: str | None = None
    ) -> Reservation:
        """Reserve `node` for a pod someone else decided on (the extender's bind)."""
        with self._lock:
            self._ledger.expire()
            return self._ledger.reserve(
                key or uuid.uuid4().hex, pod, node, hold_for=hold_for, origin=origin
            )

    def release(self, key: str) -> bool:
        """Give reservation `key` back now (its decision failed); False when already gone."""
        with self._lock:
            return self._ledger.release(key) is not None

    def expire_reservations(self) -> int:
        with self._lock:
            return len(self._ledger.expire())


def _reservation_key(obj: Mapping[str, Any]) -> str | None:
    key = bodies.annotations_of(obj).get(RESERVATION)
    return key if isinstance(key, str) and key else None
