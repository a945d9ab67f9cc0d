"""Kubernetes Events written the way kube-scheduler writes them.

`Scheduled` ("Successfully assigned ns/pod to node") and `FailedScheduling`
("0/N nodes are available: ..."), reporting controller `placement-webhook`, on
the pod, through events.k8s.io/v1. Writing happens on a background thread
from a bounded queue, so a watch or a request thread never waits on the API;
when the queue is full the event is dropped and counted (events are
best-effort in Kubernetes too). Repeated identical events on one object are
rate limited, as the event broadcaster's spam filter does.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "placement-webhook"


class EventSink(Protocol):
    def create(self, path: str, body: Mapping[str, Any], **params: Any) -> dict[str, Any]: ...


@dataclass(frozen=True)
class EventSpec:
    namespace: str
    pod_name: str
    pod_uid: str
    event_type: str  # Normal | Warning
    reason: str  # Scheduled | FailedScheduling | PlacementConflict
    note: str
    action: str = "Binding"


def event_body(spec: EventSpec, instance: str, now: dt.datetime) -> dict[str, Any]:
    """An events.k8s.io/v1 Event on the pod."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": f"{spec.pod_name}.{uuid.uuid4().hex[:16]}",
            "namespace": spec.namespace,
        },
        "eventTime": stamp,
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": instance,
        "action": spec.action,
        "reason": spec.reason,
        "type": spec.event_type,
        "note": spec.note[:1024],
        "regarding": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": spec.namespace,
            "name": spec.pod_name,
            "uid": spec.pod_uid,
        },
    }


def scheduled(namespace: str, name: str, uid: str, node: str) -> EventSpec:
    return EventSpec(
        namespace, name, uid, "Normal", "Scheduled",
        f"Successfully assigned {namespace}/{name} to {node}",
    )  # fmt: skip


def failed_scheduling(namespace: str, name: str, uid: str, message: str) -> EventSpec:
    return EventSpec(namespace, name, uid, "Warning", "FailedScheduling", message, "Scheduling")


class EventRecorder:
    """Queues events and writes them from one background thread."""

    def __init__(
        self,
        sink: EventSink,
        *,
        instance: str,
        capacity: int = 10000,
        same_event_interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.sink, self.instance = sink, instance
        self.same_event_interval, self.clock = same_event_interval, clock
        self.queue: queue.Queue[EventSpec | None] = queue.Queue(capacity)
        self.dropped = 0
        self.written = 0
        self._recent: dict[tuple[str, str, str, str], float] = {}
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)
        self._thread.start()

    def record(self, spec: EventSpec) -> bool:
        """Queue an event; False when rate limited or the queue is full."""
        key = (spec.namespace, spec.pod_name, spec.reason, spec.note)
        now = self.clock()
        last = self._recent.get(key)
        if last is not None and now - last < self.same_event_interval:
            return False
        self._recent[key] = now
        if len(self._recent) > 50000:
            cutoff = now - self.same_event_interval
            self._recent = {k: t for k, t in self._recent.items() if t >= cutoff}
        try:
            self.queue.put_nowait(spec)
        except queue.Full:
            self.dropped += 1
            return False
        return True

    def close(self, timeout: float = 5.0) -> None:
        self.queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            spec = self.queue.get()
            if spec is None:
                return
            path = f"/apis/events.k8s.io/v1/namespaces/{spec.namespace}/events"
            try:
                self.sink.create(path, event_body(spec, self.instance, dt.datetime.now(dt.UTC)))
                self.written += 1
            except Exception as err:
                log.warning("event %s on %s/%s not written: %s", spec.reason,
                            spec.namespace, spec.pod_name, err)  # fmt: skip


def placement_conflict(
    namespace: str, name: str, uid: str, note: str, action: str = "Report"
) -> EventSpec:
    """Warning on the pod that lost a placement conflict (action Report or Evict)."""
    return EventSpec(namespace, name, uid, "Warning", "PlacementConflict", note, action)


def placement_repaired(namespace: str, name: str, uid: str, note: str) -> EventSpec:
    """Warning on a pending pod we deleted so that its controller recreates it unpinned."""
    return EventSpec(namespace, name, uid, "Warning", "PlacementRepaired", note, "Delete")
