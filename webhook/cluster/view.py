"""The cached cluster view: a policy snapshot kept in sync, plus reservations.

One lock guards the snapshot. A placement runs `schedule` and records its
reservation under that lock, so two concurrent admissions can never both take
the last slot of a node. A reservation counts the pod against its node until
the watch delivers the real pod (which carries the reservation id in an
annotation, so it replaces the reservation instead of adding to it) or until
its TTL passes (the pod was rejected later in admission, or never created).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from webhook.policy.framework import Decision, schedule
from webhook.policy.model import ClusterSnapshot, PodView
from webhook.policy.profile import Profile
from webhook.policy.status import Code
from webhook.policy.workloads import WORKLOAD_KINDS, object_key

RESERVATION_ANNOTATION = "placement-webhook.io/reservation"
T = TypeVar("T")
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


@dataclass(frozen=True)
class Reservation:
    key: str
    node: str
    pod: str  # namespace/name (or generateName prefix) for logs
    expires_at: float
    ttl: float


@dataclass(frozen=True)
class SyncState:
    synced: bool
    age_seconds: float  # since the last sign of life from the slowest watch


class ClusterView:
    """A thread-safe ClusterSnapshot with reservations and sync bookkeeping."""

    def __init__(
        self,
        snapshot: ClusterSnapshot | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        synced: bool = False,
    ):
        self._lock = threading.Lock()
        self._snapshot = snapshot or ClusterSnapshot.from_objects([], [])
        self._clock = clock
        self._reservations: dict[str, Reservation] = {}
        #: Called (outside the lock) when the watch delivers a pod we placed.
        self.on_fulfilled: Callable[[Mapping[str, Any], Reservation], None] | None = None
        self._known: dict[str, set[str]] = {kind: set() for kind in KINDS}
        now = clock()
        self._listed: dict[str, bool] = {kind: synced for kind in KINDS}
        self._last_seen: dict[str, float] = {kind: now for kind in KINDS}

    # ---- feeding (informers) -------------------------------------------
    @staticmethod
    def _key(kind: str, obj: Mapping[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        if kind in WORKLOAD_KINDS:
            return object_key(obj)
        return str(meta.get("uid") or meta.get("name")) if kind == "Pod" else str(meta.get("name"))

    def _upsert(self, kind: str, obj: Mapping[str, Any]) -> Reservation | None:
        """Store an object; for a pod of ours, return the reservation it fulfils."""
        fulfilled = None
        if kind == "Node":
            self._snapshot.upsert_node(obj)
        elif kind == "Pod":
            key = _reservation_key(obj)
            reservation = self._reservations.get(key) if key else None
            if reservation is not None and not (obj.get("spec") or {}).get("nodeName"):
                # Pinned by affinity, not yet bound by the scheduler: the pod
                # counts nowhere yet, so the reservation keeps holding its slot
                # for as long as the pod exists unbound.
                self._reservations[reservation.key] = replace(
                    reservation, expires_at=self._clock() + reservation.ttl
                )
                return None
            self._snapshot.upsert_pod(obj)
            if reservation is not None:
                fulfilled = self._reservations.pop(reservation.key)
        elif kind in WORKLOAD_KINDS:
            self._snapshot.workloads.upsert(kind, obj)
        else:
            self._snapshot.upsert_namespace(obj)
        self._known[kind].add(self._key(kind, obj))
        return fulfilled

    def _remove(self, kind: str, key: str, obj: Mapping[str, Any] | None = None) -> None:
        if kind == "Pod" and obj is not None:
            reservation = self._reservations.pop(_reservation_key(obj) or "", None)
            if reservation is not None:
                self._snapshot.forget(reservation.key)
        if kind == "Node":
            self._snapshot.remove_node(key)
        elif kind == "Pod":
            self._snapshot.remove_pod(key)
        elif kind in WORKLOAD_KINDS:
            self._snapshot.workloads.remove(kind, key)
        else:
            self._snapshot.remove_namespace(key)
        self._known[kind].discard(key)

    def replace(self, kind: str, pages: Iterable[list[Mapping[str, Any]]]) -> int:
        """A full list, page by page: upsert every object, then drop those that are gone.

        The lock is taken per page, so decisions go on during a long re-list
        (against a view that is a mix of the old and the new list, as any
        watch-fed cache is for a moment); raw pages are freed as they go.
        """
        seen: set[str] = set()
        for page in pages:
            with self._lock:
                for obj in page:
                    self._upsert(kind, obj)
                    seen.add(self._key(kind, obj))
        with self._lock:
            for gone in self._known[kind] - seen:
                self._remove(kind, gone)
            self._listed[kind] = True
            self._last_seen[kind] = self._clock()
        return len(seen)

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        fulfilled = None
        with self._lock:
            if event == "DELETED":
                self._remove(kind, self._key(kind, obj), obj)
            else:
                fulfilled = self._upsert(kind, obj)
            self._last_seen[kind] = self._clock()
        if fulfilled is not None and self.on_fulfilled is not None:
            self.on_fulfilled(obj, fulfilled)

    def touch(self, kind: str) -> None:
        with self._lock:
            self._last_seen[kind] = self._clock()

    # ---- reading -------------------------------------------------------
    def sync_state(self, kinds: Iterable[str] = KINDS) -> SyncState:
        with self._lock:
            now = self._clock()
            kinds = list(kinds)
            synced = all(self._listed[k] for k in kinds)
            age = max(now - self._last_seen[k] for k in kinds)
        return SyncState(synced=synced, age_seconds=age)

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        """Labels of a namespace the view knows, or None when it does not know it."""
        with self._lock:
            if name not in self._known["Namespace"]:
                return None
            return dict(self._snapshot.namespace_labels(name))

    def reservations(self) -> list[Reservation]:
        with self._lock:
            return list(self._reservations.values())

    def node_count(self) -> int:
        with self._lock:
            return len(self._snapshot)

    def evaluate(self, fn: Callable[[ClusterSnapshot], T]) -> T:
        """Run `fn` on the snapshot under the lock (the extender's reads and assumptions).

        `fn` must not keep the snapshot: it changes as soon as the lock is released.
        """
        with self._lock:
            self._expire_locked()
            return fn(self._snapshot)

    # ---- placing -------------------------------------------------------
    def place(
        self, pod: PodView, profile: Profile, *, reserve_for: float | None, seed: str | None = None
    ) -> tuple[Decision, str | None]:
        """Decide for `pod`; when placed and `reserve_for` is set, hold the slot that long.

        `seed` breaks ties between equally good nodes (the admission request
        uid: pods of one ReplicaSet have no name or uid yet at admission).
        Returns the decision and the reservation id (None for a dry run, or
        when nothing was placed).
        """
        with self._lock:
            self._expire_locked()
            decision = schedule(pod, self._snapshot, profile, seed=seed)
            if decision.code is not Code.Success or decision.node is None or reserve_for is None:
                return decision, None
            key = uuid.uuid4().hex
            self._snapshot.assume(pod, decision.node, key)
            self._reservations[key] = Reservation(
                key=key,
                node=decision.node,
                pod=f"{pod.namespace}/{pod.name}",
                expires_at=self._clock() + reserve_for,
                ttl=reserve_for,
            )
            return decision, key

    def release(self, key: str) -> bool:
        """Give reservation `key` back now (its bind failed); False when already gone.

        The admission path cannot know when a pod it placed is rejected later
        and relies on the TTL; a binder knows at once and should not keep a
        phantom pod on the node until then.
        """
        with self._lock:
            if self._reservations.pop(key, None) is None:
                return False
            self._snapshot.forget(key)
            return True

    def expire_reservations(self) -> int:
        with self._lock:
            return self._expire_locked()

    def _expire_locked(self) -> int:
        now = self._clock()
        expired = [r.key for r in self._reservations.values() if r.expires_at <= now]
        for key in expired:
            self._snapshot.forget(key)
            del self._reservations[key]
        return len(expired)


def _reservation_key(obj: Mapping[str, Any]) -> str | None:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    key = annotations.get(RESERVATION_ANNOTATION)
    return key if isinstance(key, str) and key else None
