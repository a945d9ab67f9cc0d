"""The load: pod creation at a scenario's arrival pattern, and a watch for bindings.

Times are seconds since the run's t0 on one monotonic clock. Per pod:
`sent` (the request leaves, after the client's rate limiter let it go),
`created` (the API server answered), `bound` (the first sign of a node: the
create answer itself in nodeName mode, else the watch event that carries
spec.nodeName), and on hollow kubelets `running` (the watch event that first
shows phase Running) or `rejected` (the reason of a Failed phase: the
kubelet refused the pod). The watch runs on its own client so creation
never queues behind it.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from experiments.scenario import Arrival
from webhook.extender.ratelimit import TokenBucket

log = logging.getLogger(__name__)


class Client(Protocol):
    def get(self, path: str, **params: Any) -> dict[str, Any]: ...

    def create(self, path: str, body: Mapping[str, Any], **params: Any) -> dict[str, Any]: ...

    def watch(
        self, path: str, *, resource_version: str, timeout_seconds: int = 300, **params: Any
    ) -> Any: ...


@dataclass
class PodRecord:
    name: str
    index: int
    sent: float = float("nan")
    created: float | None = None
    bound: float | None = None
    node: str | None = None
    error: str | None = None
    placed_at_create: bool = False
    """The create answer already named a node (admission placed the pod)."""
    running: float | None = None
    rejected: str | None = None
    """The kubelet's reason (OutOfcpu ...) when the pod ended Failed."""

    @property
    def create_latency(self) -> float | None:
        return None if self.created is None else self.created - self.sent

    @property
    def bind_latency(self) -> float | None:
        return None if self.bound is None else self.bound - self.sent


class BindWatcher:
    """Watches a namespace's pods and remembers when each one first had a node."""

    def __init__(self, client: Client, namespace: str, clock: Callable[[], float]):
        self.client, self.namespace, self.clock = client, namespace, clock
        self.bound: dict[str, tuple[float, str]] = {}
        self.running: dict[str, float] = {}
        self.rejected: dict[str, str] = {}
        self.events = 0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods"

    def start(self) -> None:
        version = str(self.client.get(self.path, limit=1)["metadata"]["resourceVersion"])
        self._thread = threading.Thread(target=self._run, args=(version,), daemon=True)
        self._thread.start()

    def _run(self, version: str) -> None:
        while not self._stop.is_set():
            try:
                for event in self.client.watch(
                    self.path, resource_version=version, timeout_seconds=60
                ):
                    if self._stop.is_set():
                        return
                    obj = event.get("object") or {}
                    meta = obj.get("metadata") or {}
                    version = str(meta.get("resourceVersion") or version)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        name, now = str(meta.get("name")), self.clock()
                        node = (obj.get("spec") or {}).get("nodeName")
                        if node:
                            self.note(name, str(node), now)
                        self._note_phase(name, obj.get("status") or {}, now)
                    self.events += 1
            except Exception as err:  # reconnect: the watch is the measurement
                if self._stop.is_set():
                    return
                log.warning("bench watch failed (%s); resuming", err)
                time.sleep(0.2)

    def note(self, name: str, node: str, when: float) -> None:
        with self._cond:
            if name not in self.bound:
                self.bound[name] = (when, node)
                self._cond.notify_all()

    def _note_phase(self, name: str, status: Mapping[str, Any], when: float) -> None:
        phase = status.get("phase")
        if phase not in ("Running", "Failed"):
            return
        with self._cond:
            if phase == "Running":
                self.running.setdefault(name, when)
            else:
                self.rejected[name] = str(status.get("reason") or "Failed")
            self._cond.notify_all()

    def wait_started(self, names: Sequence[str], deadline: float) -> bool:
        """Block until each bound name ran or was rejected by its kubelet, or `deadline`."""
        with self._cond:
            while True:
                waiting = [
                    n for n in names
                    if n in self.bound and n not in self.running and n not in self.rejected
                ]  # fmt: skip
                if not waiting:
                    return True
                left = deadline - self.clock()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.5))

    def wait(self, names: Sequence[str], deadline: float) -> bool:
        """Block until every name is bound or the clock passes `deadline`."""
        with self._cond:
            while True:
                if all(n in self.bound for n in names):
                    return True
                left = deadline - self.clock()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.5))

    def stop(self) -> None:
        self._stop.set()


def create_pods(
    client: Client,
    manifests: Sequence[Mapping[str, Any]],
    arrival: Arrival,
    limiter: TokenBucket,
    watcher: BindWatcher,
    clock: Callable[[], float],
    *,
    deadline: float,
    on_sent: Callable[[int], None] | None = None,
    sequential_timeout: float = 10.0,
    wait_bound: bool = True,
) -> list[PodRecord]:
    """Create every pod per `arrival`; returns one record per manifest, in order.

    Sequential arrival waits for each pod to be bound before the next (unless
    `wait_bound` is off: nothing binds in the ceiling arm).
    """
    records = [PodRecord(m["metadata"]["name"], i) for i, m in enumerate(manifests)]
    path_of = {
        i: f"/api/v1/namespaces/{m['metadata']['namespace']}/pods" for i, m in enumerate(manifests)
    }

    def send(i: int) -> None:
        record = records[i]
        limiter.wait()
        record.sent = clock()
        if on_sent is not None:
            on_sent(i)
        try:
            answer = client.create(path_of[i], manifests[i])
        except Exception as err:
            record.created = None
            record.error = str(err)[:300]
            return
        record.created = clock()
        node = (answer.get("spec") or {}).get("nodeName")
        if node:
            record.placed_at_create = True
            watcher.note(record.name, str(node), record.created)

    if arrival.mode == "sequential":
        for i in range(len(manifests)):
            if clock() > deadline:
                break
            send(i)
            if wait_bound:
                watcher.wait([records[i].name], min(deadline, clock() + sequential_timeout))
        return records

    work: queue.Queue[int] = queue.Queue()
    for i in range(len(manifests)):
        work.put(i)
    start = clock()

    def worker() -> None:
        while True:
            try:
                i = work.get_nowait()
            except queue.Empty:
                return
            if arrival.mode == "rate":
                due = start + i / arrival.rate
                with contextlib.suppress(ValueError):
                    time.sleep(max(0.0, due - clock()))
            if clock() > deadline:
                return
            send(i)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(arrival.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records


def finish(records: Sequence[PodRecord], watcher: BindWatcher) -> None:
    """Copy the watcher's bind and run times, nodes and rejections into the records."""
    for record in records:
        seen = watcher.bound.get(record.name)
        if seen is not None:
            record.bound, record.node = seen
        record.running = watcher.running.get(record.name)
        record.rejected = watcher.rejected.get(record.name)
