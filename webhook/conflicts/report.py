"""The reporting shell: detection passes, Warning events, metrics, evictions.

A pass takes the store's changes since the last pass into the pure
incremental `Detector` (which re-checks only what they touch) and compares
with the previous pass. The first pass, and every `safety_every`-th, builds
a fresh detector from a full copy instead (a full pass: nothing the
incremental one missed survives it). Every replica detects (so each one's /debug/conflicts and
/metrics are true), but only the leader writes: a `PlacementConflict`
Warning on each pod that newly lost a conflict, and, in evict mode, an
Eviction for each target `remediation` allows. A new leader reports the
conflicts that still stand once more, which is better than never.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from webhook.conflicts.incremental import Detector
from webhook.conflicts.model import (
    HOST_PORT,
    KINDS,
    OVERCOMMIT,
    POD_ANTI_AFFINITY,
    TOPOLOGY_SPREAD,
    Conflict,
    PodRef,
)
from webhook.conflicts.remediation import eviction_targets
from webhook.conflicts.store import ConflictStore
from webhook.events import EventRecorder, placement_conflict

log = logging.getLogger(__name__)


class EvictionClient(Protocol):
    def create(self, path: str, body: Mapping[str, Any], **params: Any) -> dict[str, Any]: ...


@dataclass
class ConflictMetrics:
    detected: Counter
    current: Gauge
    evictions: Counter
    pass_seconds: Histogram

    @classmethod
    def create(cls, registry: CollectorRegistry) -> ConflictMetrics:
        metrics = cls(
            detected=Counter(
                "placement_webhook_conflicts_detected",
                "Conflicts seen for the first time by this process, by kind.",
                ["kind"],
                registry=registry,
            ),
            current=Gauge(
                "placement_webhook_conflicts",
                "Conflicts standing at the last detection pass, by kind.",
                ["kind"],
                registry=registry,
            ),
            evictions=Counter(
                "placement_webhook_conflict_evictions",
                "Evictions asked for by evict mode, by result.",
                ["result"],
                registry=registry,
            ),
            pass_seconds=Histogram(
                "placement_webhook_conflict_pass_seconds",
                "Time of one detection pass (copy, detect, compare).",
                buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
                registry=registry,
            ),
        )
        for kind in KINDS:
            metrics.detected.labels(kind)
            metrics.current.labels(kind).set(0)
        return metrics


@dataclass(frozen=True)
class PassResult:
    conflicts: tuple[Conflict, ...]
    new: tuple[Conflict, ...]
    store_version: int
    at: str
    seconds: float


@dataclass
class _State:
    last: PassResult | None = None
    passes: int = 0
    known: set[str] = field(default_factory=set)
    reported: set[tuple[str, str]] = field(default_factory=set)
    evicted: dict[str, str] = field(default_factory=dict)  # uid -> result
    retry_evictions: bool = False  # the last pass left an eviction to try again


class ConflictReporter:
    """Runs detection passes over a store and reports what they find."""

    def __init__(
        self,
        store: ConflictStore,
        metrics: ConflictMetrics,
        *,
        recorder: EventRecorder | None = None,
        client: EvictionClient | None = None,
        evict: bool = False,
        is_leader: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.perf_counter,
        safety_every: int = 150,
    ):
        self.store, self.metrics, self.recorder, self.client = store, metrics, recorder, client
        self.evict, self.is_leader, self.clock = evict, is_leader, clock
        self.safety_every = safety_every
        self._lock = threading.Lock()
        self._state = _State()
        self._detect_lock = threading.Lock()
        self._detector: Detector | None = None
        self._since_full = 0

    def _detect(self) -> tuple[int, tuple[Conflict, ...], set[str]]:
        """(store version, conflicts, live pod uids): incremental, or a full pass when due."""
        with self._detect_lock:
            full = self._detector is None or self._since_full >= self.safety_every
            delta = self.store.take(full)
            if delta.full is not None:
                # the old detector goes first (nothing else refers to it: freed here), its
                # memory reused by the new one, instead of the process growing by one
                # detector (75 MiB at 5k nodes / 150k pods)
                self._detector = None
                det = Detector()
                for name, labels in delta.full.namespace_labels.items():
                    det.put_namespace(name, labels)
                for view in delta.full.nodes.values():
                    det.put_node(view)
                for rec in delta.full.pods:
                    det.put_pod(rec)
                self._detector, self._since_full = det, 0
            else:
                assert self._detector is not None
                det = self._detector
                for kind, key, new in delta.changes:
                    det.apply(kind, key, new)
                self._since_full += 1
            return delta.version, tuple(det.conflicts()), set(det.pods)

    def run_pass(self) -> PassResult:
        start = self.clock()
        version, conflicts, live = self._detect()
        with self._lock:
            state = self._state
            keys = {c.key for c in conflicts}
            new = tuple(c for c in conflicts if c.key not in state.known)
            state.known = keys
            state.evicted = {u: r for u, r in state.evicted.items() if u in live}
            current_culprits = {(c.key, p.uid) for c in conflicts for p in c.culprits}
            state.reported &= current_culprits
        for c in new:
            self.metrics.detected.labels(c.kind).inc()
        for kind in KINDS:
            self.metrics.current.labels(kind).set(sum(1 for c in conflicts if c.kind == kind))
        if self.is_leader():
            self._report(conflicts)
            if self.evict and self.client is not None:
                self._evict(conflicts)
        seconds = self.clock() - start
        self.metrics.pass_seconds.observe(seconds)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        result = PassResult(conflicts, new, version, stamp, seconds)
        with self._lock:
            self._state.last = result
            self._state.passes += 1
        for c in new:
            log.warning(
                "placement conflict: %s", c.message,
                extra={"kind": c.kind, "node": c.node,
                       "culprits": [f"{p.namespace}/{p.name} ({p.placed_by})" for p in c.culprits]},
            )  # fmt: skip
        return result

    def _report(self, conflicts: tuple[Conflict, ...]) -> None:
        if self.recorder is None:
            return
        for c in conflicts:
            for pod in c.culprits:
                mark = (c.key, pod.uid)
                with self._lock:
                    if mark in self._state.reported:
                        continue
                    self._state.reported.add(mark)
                self.recorder.record(
                    placement_conflict(pod.namespace, pod.name, pod.uid, _note(c, pod))
                )

    def _evict(self, conflicts: tuple[Conflict, ...]) -> None:
        assert self.client is not None
        with self._lock:
            skip = set(self._state.evicted)
        retry = False
        for target in eviction_targets(conflicts, skip=skip):
            pod = target.pod
            result = self._post_eviction(pod)
            self.metrics.evictions.labels(result).inc()
            log.info(
                "evict %s/%s from %s: %s", pod.namespace, pod.name, target.conflict.node, result,
                extra={"kind": target.conflict.kind},
            )  # fmt: skip
            if result in ("evicted", "gone"):
                with self._lock:
                    self._state.evicted[pod.uid] = result
            else:
                retry = True
            if result == "evicted" and self.recorder is not None:
                note = f"evicted to resolve a placement conflict: {target.conflict.message}"
                self.recorder.record(
                    placement_conflict(pod.namespace, pod.name, pod.uid, note, action="Evict")
                )
        with self._lock:
            self._state.retry_evictions = retry

    def _post_eviction(self, pod: PodRef) -> str:
        assert self.client is not None
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
            "deleteOptions": {"preconditions": {"uid": pod.uid}},
        }
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction"
        try:
            self.client.create(path, body)
        except Exception as err:  # an ApiError or a transport error: try again next pass
            status = getattr(err, "status", None)
            if status == 429:
                return "blocked"  # a PodDisruptionBudget says not now
            if status in (404, 409):
                return "gone"
            log.warning("eviction of %s/%s failed: %s", pod.namespace, pod.name, err)
            return "error"
        return "evicted"

    # ---- reading -------------------------------------------------------
    @property
    def retry_evictions(self) -> bool:
        """An eviction was refused (PDB) or failed: run the next pass even if nothing changed."""
        with self._lock:
            return self._state.retry_evictions

    @property
    def passes(self) -> int:
        with self._lock:
            return self._state.passes

    def as_json(self) -> dict[str, Any]:
        """The current list for GET /debug/conflicts."""
        with self._lock:
            last, passes = self._state.last, self._state.passes
            evicted = dict(self._state.evicted)
        if last is None:
            return {"passes": 0, "conflicts": []}
        return {
            "passes": passes,
            "at": last.at,
            "storeVersion": last.store_version,
            "seconds": round(last.seconds, 6),
            "evictMode": self.evict,
            "evicted": sorted(evicted),
            "conflicts": [c.to_json() for c in last.conflicts],
        }


_LOST: Final = {
    OVERCOMMIT: "a kubelet admitting the node's pods in arrival order would reject it",
    HOST_PORT: "it arrived after the pod already using the port",
    POD_ANTI_AFFINITY: "it arrived after the other pod",
    TOPOLOGY_SPREAD: "it is among the last to arrive in the crowded domain",
}


def _note(conflict: Conflict, pod: PodRef) -> str:
    """The Warning's text: what is wrong, who placed this pod, and why this pod lost."""
    placer = pod.placed_by + (f" ({pod.detail})" if pod.detail else "")
    why = _LOST.get(conflict.kind)
    tail = f"; this pod lost: {why}" if why else ""
    return f"{conflict.kind}: {conflict.message}; placed by {placer}{tail}"


class ConflictLoop:
    """Runs a pass whenever the store changed, at most every `interval` seconds."""

    def __init__(self, reporter: ConflictReporter, *, interval: float = 2.0):
        self.reporter, self.interval = reporter, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="conflicts", daemon=True)
        self._last_version = -1
        self._last_leader = False

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            version = self.reporter.store.version
            leader = self.reporter.is_leader()
            retry = leader and self.reporter.retry_evictions
            if version == self._last_version and leader == self._last_leader and not retry:
                continue
            try:
                self.reporter.run_pass()
            except Exception:  # a bug in one pass must not end detection
                log.exception("conflict detection pass failed")
            self._last_version, self._last_leader = version, leader
