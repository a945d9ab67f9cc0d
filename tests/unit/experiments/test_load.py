"""The load generator: arrival patterns and bind detection, against a scripted API.

No assertion depends on how fast a thread runs: a bind the test checks the
timing of is released only after every create answered, and bounds are causal
(a sequential pod is sent after the previous one's bind was seen).
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from experiments.load import BindWatcher, create_pods, finish
from experiments.scenario import Arrival
from webhook.extender.ratelimit import TokenBucket


class FakeApi:
    """Creates answer at once; `bind_on_create` plays the webhook (nodeName in the answer).

    Otherwise a 'scheduler' binds pods through the watch: each pod `delay`
    seconds after its create (`delay` set), or only when the test calls
    `bind_created()` (no delay), so that a bind is known to come after the
    create's answer. `close()` ends the watch stream, so the watcher's thread ends.
    """

    def __init__(
        self,
        *,
        bind_on_create: bool,
        delay: float | None = None,
        fail: frozenset[str] = frozenset(),
    ):
        self.bind_on_create, self.delay, self.fail = bind_on_create, delay, fail
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.created: list[str] = []
        self.unbound: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.watch_threads: list[threading.Thread] = []

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        return {"metadata": {"resourceVersion": "1"}, "items": []}

    def create(self, path: str, body: Mapping[str, Any], **params: Any) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if name in self.fail:
            raise RuntimeError("422 invalid")
        with self.lock:
            self.created.append(name)
        if self.bind_on_create:
            return {**body, "spec": {**body["spec"], "nodeName": "n1"}}
        bound = {**body, "spec": {**body["spec"], "nodeName": "n2"}}
        if self.delay is None:
            with self.lock:
                self.unbound.append(bound)
        else:
            threading.Timer(
                self.delay, lambda: self.events.put({"type": "MODIFIED", "object": bound})
            ).start()
        return dict(body)

    def bind_created(self) -> None:
        """The 'scheduler' binds every pod created so far."""
        with self.lock:
            bound, self.unbound = self.unbound, []
        for obj in bound:
            self.events.put({"type": "MODIFIED", "object": obj})

    def watch(
        self, path: str, *, resource_version: str, timeout_seconds: int = 300, **params: Any
    ) -> Iterator[dict[str, Any]]:
        self.watch_threads.append(threading.current_thread())
        while not self.closed.is_set():
            try:
                yield self.events.get(timeout=0.05)
            except queue.Empty:
                continue

    def close(self) -> None:
        self.closed.set()


def manifests(n: int) -> list[dict[str, Any]]:
    return [{"metadata": {"name": f"p{i}", "namespace": "ns"}, "spec": {}} for i in range(n)]


def run(api: FakeApi, arrival: Arrival, n: int = 6) -> tuple[list[Any], BindWatcher]:
    """Create `n` pods as the harness does, wait for their binds, and stop the watch."""
    watcher = BindWatcher(api, "ns", time.monotonic)
    watcher.start()
    try:
        records = create_pods(
            api, manifests(n), arrival, TokenBucket(0, 0), watcher, time.monotonic,
            deadline=time.monotonic() + 60,
        )  # fmt: skip
        api.bind_created()
        created = [r.name for r in records if r.error is None]
        assert watcher.wait(created, time.monotonic() + 30), "binds not seen through the watch"
        finish(records, watcher)
    finally:
        watcher.stop()
        api.close()
        for thread in api.watch_threads:
            thread.join(timeout=10)
    assert not any(t.is_alive() for t in api.watch_threads), "the watcher's thread outlived stop"
    return records, watcher


def test_a_pod_placed_at_admission_is_bound_when_its_create_returns() -> None:
    records, _ = run(FakeApi(bind_on_create=True), Arrival("burst", clients=3))

    assert all(r.placed_at_create and r.bound == r.created and r.node == "n1" for r in records)


def test_a_pod_bound_later_is_seen_through_the_watch() -> None:
    records, _ = run(FakeApi(bind_on_create=False), Arrival("burst", clients=2))

    # Every bind came after every create's answer (bind_created), so the bind
    # time the watcher saw must be later than the create time.
    assert all(not r.placed_at_create and r.node == "n2" for r in records)
    assert all(r.bound is not None and r.created is not None and r.bound >= r.created
               for r in records)  # fmt: skip


def test_sequential_arrival_creates_each_pod_only_after_the_previous_one_is_bound() -> None:
    records, _ = run(FakeApi(bind_on_create=False, delay=0.02), Arrival("sequential"), n=4)

    for earlier, later in itertools.pairwise(records):
        assert earlier.bound is not None and later.sent >= earlier.bound


def test_rate_arrival_spaces_the_requests() -> None:
    records, _ = run(FakeApi(bind_on_create=True), Arrival("rate", rate=50, clients=4), n=5)

    sent = sorted(r.sent for r in records)
    assert sent[-1] - sent[0] >= 4 / 50 * 0.9


def test_a_failed_create_is_recorded_and_does_not_stop_the_others() -> None:
    api = FakeApi(bind_on_create=True, fail=frozenset({"p2"}))

    records, _ = run(api, Arrival("burst", clients=2))

    failed = [r for r in records if r.error]
    assert [r.name for r in failed] == ["p2"]
    assert len(api.created) == 5
