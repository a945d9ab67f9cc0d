"""The pending-pod queue, shaped like kube-scheduler's PriorityQueue. Pure: the clock is passed in.

Three places a pod can wait, as in kube-scheduler:

- active: ready to be tried, ordered by priority then arrival;
- backoff: failed recently, ready again after `initial * 2^(attempts-1)`
  seconds (capped at `maximum`) from its last attempt;
- unschedulable: no node fitted; it waits for a cluster event that may
  help (node added or changed, an assigned pod deleted...) rather than for a
  timer, and is flushed anyway after `max_unschedulable` seconds as a safety
  net for events the hints do not cover.

A cluster event moves unschedulable pods whose failure reasons it may
resolve (queueing hints, by reason string) to backoff, or straight to active
when their backoff has passed. An event that arrives while a pod is being
tried is remembered (`move_cycle`), so a pod that fails right after the
cluster changed under it goes to backoff, not to unschedulable, exactly as
kube-scheduler's moveRequestCycle does.

Not thread-safe: the shell serialises access (one lock).
"""

from __future__ import annotations

import enum
import heapq
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "Attempt",
    "BackoffSettings",
    "ClusterEvent",
    "SchedulingQueue",
    "backoff_duration",
    "event_may_help",
]


class ClusterEvent(enum.Enum):
    NODE_ADD = "NodeAdd"
    NODE_UPDATE = "NodeUpdate"
    ASSIGNED_POD_ADD = "AssignedPodAdd"
    ASSIGNED_POD_UPDATE = "AssignedPodUpdate"
    ASSIGNED_POD_DELETE = "AssignedPodDelete"


@dataclass(frozen=True)
class BackoffSettings:
    initial: float = 1.0
    """kube-scheduler's podInitialBackoffSeconds."""
    maximum: float = 10.0
    """kube-scheduler's podMaxBackoffSeconds."""
    max_unschedulable: float = 60.0
    """Longest wait in unschedulable without an event (kube-scheduler: 5 minutes)."""

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise ValueError("backoff: need 0 < initial <= maximum")
        if self.max_unschedulable <= 0:
            raise ValueError("backoff: max_unschedulable must be positive")


def backoff_duration(attempts: int, settings: BackoffSettings) -> float:
    """kube-scheduler's calculateBackoffDuration: initial doubled per extra attempt, capped."""
    duration = settings.initial
    for _ in range(1, attempts):
        duration *= 2
        if duration >= settings.maximum:
            return settings.maximum
    return duration


# Reasons no change to other pods can fix (the node itself must change).
_NODE_ONLY: Final = (
    "didn't match Pod's node affinity/selector",
    "didn't match scheduler-enforced node affinity",
    "didn't match the requested node name",
    "were unschedulable",
    "had untolerated taint",
    "(missing required label)",
    "didn't satisfy plugin(s)",
)
# Reasons another pod arriving can fix (affinity to it, a spread domain's minimum).
_HELPED_BY_POD_ADD: Final = ("didn't match pod affinity rules", "topology spread constraints")
_NODE_EVENTS: Final = frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_UPDATE})


def event_may_help(event: ClusterEvent, reasons: Iterable[str]) -> bool:
    """Could `event` make a pod rejected for `reasons` schedulable? (a queueing hint)

    Pods with no recorded reasons (errors, or the policy could not evaluate
    them) are moved by node events only.
    """
    reasons = list(reasons)
    if event in _NODE_EVENTS:
        return True
    if not reasons:
        return False
    if event is ClusterEvent.ASSIGNED_POD_ADD:
        return any(
            any(h in r for h in _HELPED_BY_POD_ADD) and "(missing required label)" not in r
            for r in reasons
        )
    return any(not any(n in r for n in _NODE_ONLY) for r in reasons)


@dataclass(frozen=True)
class Attempt:
    """A pod handed out by `pop` for one scheduling attempt."""

    key: str
    pod: Mapping[str, Any]
    attempts: int
    """Failed attempts before this one."""
    first_seen: float
    cycle: int


ACTIVE: Final = "active"
BACKOFF: Final = "backoff"
UNSCHEDULABLE: Final = "unschedulable"
IN_FLIGHT: Final = "in-flight"


@dataclass
class _Entry:
    key: str
    pod: Mapping[str, Any]
    priority: int
    signature: str
    seq: int
    first_seen: float
    where: str = ACTIVE
    attempts: int = 0
    last_attempt: float = 0.0
    since: float = 0.0  # when it entered `where`
    reasons: frozenset[str] = field(default_factory=frozenset)
    cycle: int = -1
    updated_in_flight: bool = False


class SchedulingQueue:
    """Pending pods by key (the pod uid) with kube-scheduler's active/backoff/unschedulable."""

    def __init__(self, settings: BackoffSettings = BackoffSettings()):
        self.settings = settings
        self._entries: dict[str, _Entry] = {}
        # Heaps with lazy deletion: an item is live while its seq matches the entry's.
        self._active: list[tuple[int, int, str]] = []  # (-priority, seq, key)
        self._backoff: list[tuple[float, int, str]] = []  # (ready_at, seq, key)
        self._flush_at: list[tuple[float, int, str]] = []  # (since + limit, seq, key)
        self._unschedulable: dict[str, None] = {}  # insertion-ordered set of keys
        self._seq = itertools.count()
        self.cycle = 0
        self.move_cycle = -1

    # ---- membership ----------------------------------------------------
    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[str]:
        return list(self._entries)

    def where(self, key: str) -> str | None:
        entry = self._entries.get(key)
        return entry.where if entry else None

    def counts(self) -> dict[str, int]:
        out = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, IN_FLIGHT: 0}
        for entry in self._entries.values():
            out[entry.where] += 1
        return out

    def add(
        self,
        key: str,
        pod: Mapping[str, Any],
        *,
        now: float,
        priority: int = 0,
        signature: str = "",
    ) -> None:
        """A pending pod was seen (added or updated).

        An update that changes what scheduling looks at (`signature`) moves an
        unschedulable pod on; status-only updates do not.
        """
        entry = self._entries.get(key)
        if entry is None:
            entry = _Entry(key, pod, priority, signature, -1, now, since=now)
            self._entries[key] = entry
            self._push_active(entry, now)
            return
        changed = signature != entry.signature
        entry.pod, entry.priority, entry.signature = pod, priority, signature
        if entry.where == IN_FLIGHT:
            entry.updated_in_flight = entry.updated_in_flight or changed
        elif entry.where == UNSCHEDULABLE and changed:
            self._requeue(entry, now)

    def delete(self, key: str) -> None:
        """The pod is bound, deleted or no longer ours."""
        self._entries.pop(key, None)
        self._unschedulable.pop(key, None)

    # ---- the scheduling loop ---------------------------------------------
    def pop(self, now: float) -> Attempt | None:
        """The next pod to try, or None when nothing is ready."""
        self.flush(now)
        while self._active:
            _, seq, key = heapq.heappop(self._active)
            entry = self._entries.get(key)
            if entry is None or entry.where != ACTIVE or entry.seq != seq:
                continue
            self._move(entry, IN_FLIGHT, now)
            self.cycle += 1  # as kube-scheduler: an event before this pop is not "during" it
            entry.cycle, entry.updated_in_flight = self.cycle, False
            return Attempt(key, entry.pod, entry.attempts, entry.first_seen, entry.cycle)
        return None

    def done(self, key: str) -> None:
        """Bound (or found bound): forget the pod."""
        self.delete(key)

    def unschedulable(self, key: str, now: float, reasons: Iterable[str] = ()) -> None:
        """No node fitted: wait for a cluster event (or back off, if one came meanwhile)."""
        entry = self._entries.get(key)
        if entry is None or entry.where != IN_FLIGHT:
            return
        entry.attempts += 1
        entry.last_attempt = now
        entry.reasons = frozenset(reasons)
        if self.move_cycle >= entry.cycle or entry.updated_in_flight:
            self._to_backoff(entry, now)
        else:
            self._move(entry, UNSCHEDULABLE, now)
            heapq.heappush(
                self._flush_at, (now + self.settings.max_unschedulable, entry.seq, entry.key)
            )

    def error(self, key: str, now: float) -> None:
        """The attempt failed for a reason other than fit (API error...): back off."""
        entry = self._entries.get(key)
        if entry is None or entry.where != IN_FLIGHT:
            return
        entry.attempts += 1
        entry.last_attempt = now
        entry.reasons = frozenset()
        self._to_backoff(entry, now)

    def give_back(self, key: str, now: float) -> None:
        """Return an in-flight pod untried (leadership lost mid-attempt)."""
        entry = self._entries.get(key)
        if entry is not None and entry.where == IN_FLIGHT:
            self._push_active(entry, now)

    def on_event(self, event: ClusterEvent, now: float) -> int:
        """Move the unschedulable pods `event` may help; returns how many moved."""
        self.move_cycle = self.cycle
        moved = 0
        for key in list(self._unschedulable):
            entry = self._entries[key]
            if event_may_help(event, entry.reasons):
                self._requeue(entry, now)
                moved += 1
        return moved

    def activate_all(self, now: float) -> None:
        """Leadership gained: every unschedulable pod goes back to backoff or active."""
        self.move_cycle = self.cycle
        for key in list(self._unschedulable):
            self._requeue(self._entries[key], now)

    def flush(self, now: float) -> None:
        """Backoff that has passed -> active; unschedulable for too long -> backoff/active."""
        while self._backoff and self._backoff[0][0] <= now:
            _, seq, key = heapq.heappop(self._backoff)
            entry = self._entries.get(key)
            if entry is not None and entry.where == BACKOFF and entry.seq == seq:
                self._push_active(entry, now)
        while self._flush_at and self._flush_at[0][0] <= now:
            _, seq, key = heapq.heappop(self._flush_at)
            entry = self._entries.get(key)
            if entry is not None and entry.where == UNSCHEDULABLE and entry.seq == seq:
                self._requeue(entry, now)

    def next_ready_in(self, now: float) -> float | None:
        """Seconds until a waiting pod becomes ready by time alone; None when none will."""
        times = [
            t
            for t in (
                self._live_top(self._backoff, BACKOFF),
                self._live_top(self._flush_at, UNSCHEDULABLE),
            )
            if t is not None
        ]
        if not times:
            return None
        return max(0.0, min(times) - now)

    def backoff_until(self, key: str) -> float | None:
        """When the pod's backoff ends (None before its first failed attempt)."""
        entry = self._entries.get(key)
        if entry is None or entry.attempts == 0:
            return None
        return entry.last_attempt + backoff_duration(entry.attempts, self.settings)

    # ---- internals -----------------------------------------------------
    def _live_top(self, heap: list[tuple[float, int, str]], where: str) -> float | None:
        while heap:
            at, seq, key = heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry.where == where and entry.seq == seq:
                return at
            heapq.heappop(heap)
        return None

    def _move(self, entry: _Entry, where: str, now: float) -> None:
        if entry.where == UNSCHEDULABLE:
            self._unschedulable.pop(entry.key, None)
        entry.where, entry.since = where, now
        entry.seq = next(self._seq)
        if where == UNSCHEDULABLE:
            self._unschedulable[entry.key] = None

    def _requeue(self, entry: _Entry, now: float) -> None:
        until = self.backoff_until(entry.key)
        if until is not None and until > now:
            self._to_backoff(entry, now)
        else:
            self._push_active(entry, now)

    def _to_backoff(self, entry: _Entry, now: float) -> None:
        self._move(entry, BACKOFF, now)
        ready_at = entry.last_attempt + backoff_duration(entry.attempts, self.settings)
        heapq.heappush(self._backoff, (ready_at, entry.seq, entry.key))

    def _push_active(self, entry: _Entry, now: float) -> None:
        self._move(entry, ACTIVE, now)
        heapq.heappush(self._active, (-entry.priority, entry.seq, entry.key))
