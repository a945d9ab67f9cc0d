"""Reservations: one ledger, keyed one way, for every decision this process makes.

A decision (an admission, a bind by the fallback binder, a bind by the
extender) counts its pod on the chosen node *before* the API has it, under a
key the pod will carry in the annotation `placement-webhook.io/reservation`:
the admission patch sets it, and a Binding's annotations are copied onto the
pod by the API server. A reservation ends in exactly one of three ways:

- the watch delivers a pod carrying the key that counts somewhere (bound, or
  pinned to a node) or is finished: the reservation *becomes* that pod, in
  the same critical section in which the view starts counting the real
  object (`fulfil`), so the slot is never counted twice or zero times;
- the decision is known to have failed (a bind refused, an answer given after
  the caller had already given up): `release`;
- nothing arrives before its deadline, the caller's timeout (the API
  server's webhook timeout, a bind request's) plus a short grace: the create
  was refused after us (quota, validation, a later webhook, AlreadyExists) or
  never happened, and the slot is given back (`expire`).

Admission reservations waiting for their pods are capped at a share of the
cluster's allocatable cpu, memory and pod slots (`admits`), so a flood of
admissions whose pods never appear (refused by a quota, by a later webhook)
cannot empty the cluster even for those few seconds. The first one always
passes (a pod larger than the share of a small cluster is still placed), and
the binder's and the extender's reservations are not capped: their pods exist.

A reservation keeps the parsed `PodView` (requests, labels, ports, affinity
terms: what other decisions read), never the raw body. Not thread-safe: the
`ClusterView`'s lock serialises every call.
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from webhook.policy.model import PodView
from webhook.policy.snapshot import ClusterSnapshot

__all__ = ["ADMISSION", "BINDER", "EXTENDER", "Ledger", "Reservation"]

ADMISSION: Final = "admission"
BINDER: Final = "binder"
EXTENDER: Final = "extender"


@dataclass(frozen=True)
class Reservation:
    key: str
    node: str
    pod: str
    """namespace/name (or the generateName prefix) of the pod, for logs."""
    origin: str
    """Which decision made it: admission, binder or extender."""
    made_at: float
    deadline: float
    cpu: int
    memory: int


class Ledger:
    """The reservations of one process, and the tentative pods they count in the snapshot."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        *,
        clock: Callable[[], float],
        max_unconfirmed_share: float = 0.5,
    ):
        if not 0 < max_unconfirmed_share <= 1:
            raise ValueError("max_unconfirmed_share must be in (0, 1]")
        self._snapshot = snapshot
        self._clock = clock
        self.max_unconfirmed_share = max_unconfirmed_share
        self._by_key: dict[str, Reservation] = {}
        self._deadlines: list[tuple[float, str]] = []  # a heap; stale entries skipped
        self._admissions = 0  # admission reservations held, and their cpu and memory
        self._cpu = 0
        self._memory = 0
        self.fulfilled = 0
        self.released = 0
        self.expired = 0

    def __len__(self) -> int:
        return len(self._by_key)

    def __iter__(self) -> Iterator[Reservation]:
        return iter(list(self._by_key.values()))

    def get(self, key: str) -> Reservation | None:
        return self._by_key.get(key)

    def admits(self, pod: PodView, origin: str = ADMISSION) -> bool:
        """Whether one more admission reservation for `pod` stays within the share cap.

        Checked for cpu, memory and pod slots against the whole cluster's
        allocatable amounts; a cluster that has none of a resource caps nothing
        for it.
        """
        if origin != ADMISSION or not self._admissions:
            return True
        share = self.max_unconfirmed_share
        slots = self._snapshot.total_allocatable("pods")
        if slots and self._admissions + 1 > share * slots:
            return False
        for resource, held in (("cpu", self._cpu), ("memory", self._memory)):
            wanted = pod.requests.get(resource, 0)
            total = self._snapshot.total_allocatable(resource)
            if wanted and total and held + wanted > share * total:
                return False
        return True

    def reserve(
        self, key: str, pod: PodView, node: str, *, hold_for: float, origin: str
    ) -> Reservation:
        """Count `pod` on `node` under `key` for at most `hold_for` seconds (or until fulfilled).

        Reserving a key again replaces the old reservation (a re-check after a
        later webhook changed the pod, or a move to another node).
        """
        self._drop(key)
        now = self._clock()
        reservation = Reservation(
            key=key,
            node=node,
            pod=pod.key,
            origin=origin,
            made_at=now,
            deadline=now + hold_for,
            cpu=pod.requests.get("cpu", 0),
            memory=pod.requests.get("memory", 0),
        )
        self._by_key[key] = reservation
        heapq.heappush(self._deadlines, (reservation.deadline, key))
        self._account(reservation, 1)
        self._snapshot.assume(key, pod, node)
        return reservation

    @contextlib.contextmanager
    def suspended(self, key: str) -> Iterator[None]:
        """Leave reservation `key` uncounted for a moment (a dry-run re-check), then restore it."""
        counted = self._snapshot.tentative(key)
        if counted is None:
            yield
            return
        self._snapshot.forget(key)
        try:
            yield
        finally:
            self._snapshot.assume(key, counted[0], counted[1])

    def fulfil(self, key: str) -> Reservation | None:
        """The pod carrying `key` arrived: stop counting the tentative pod (the real one counts)."""
        reservation = self._drop(key)
        if reservation is not None:
            self.fulfilled += 1
        return reservation

    def release(self, key: str) -> Reservation | None:
        """The decision failed: give the slot back now."""
        reservation = self._drop(key)
        if reservation is not None:
            self.released += 1
        return reservation

    def expire(self) -> list[Reservation]:
        """Drop every reservation whose deadline has passed; returns them."""
        now = self._clock()
        gone = []
        while self._deadlines and self._deadlines[0][0] <= now:
            deadline, key = heapq.heappop(self._deadlines)
            reservation = self._by_key.get(key)
            if reservation is not None and reservation.deadline == deadline:
                self._drop(key)
                gone.append(reservation)
        if not self._by_key:
            self._deadlines.clear()
        self.expired += len(gone)
        return gone

    def _drop(self, key: str) -> Reservation | None:
        reservation = self._by_key.pop(key, None)
        if reservation is None:
            return None
        self._account(reservation, -1)
        self._snapshot.forget(key)
        return reservation

    def _account(self, reservation: Reservation, sign: int) -> None:
        if reservation.origin == ADMISSION:
            self._admissions += sign
            self._cpu += sign * reservation.cpu
            self._memory += sign * reservation.memory
