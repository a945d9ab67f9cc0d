"""The load generator: arrival patterns and bind detection, against a fake API."""

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
    """Creates answer at once; `bind_on_create` plays the webhook (nodeName in the answer),
    otherwise a 'scheduler' binds each pod through the watch after `delay` seconds."""

    def __init__(self, *, bind_on_create: bool, delay: float = 0.0, fail: set[str] = frozenset()):  # type: ignore[assignment]
        self.bind_on_create, self.delay, self.fail = bind_on_create, delay, fail
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.created: list[str] = []
        self.lock = threading.Lock()

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
        threading.Timer(
            self.delay, lambda: self.events.put({"type": "MODIFIED", "object": bound})
        ).start()
        return dict(body)

    def watch(
        self, path: str, *, resource_version: str, timeout_seconds: int = 300, **params: Any
    ) -> Iterator[dict[str, Any]]:
        while True:
            try:
                yield self.events.get(timeout=0.05)
            except queue.Empty:
                continue


def manifests(n: int) -> list[dict[str, Any]]:
    return [{"metadata": {"name": f"p{i}", "namespace": "ns"}, "spec": {}} for i in range(n)]


def run(api: FakeApi, arrival: Arrival, n: int = 6) -> tuple[list[Any], BindWatcher]:
    watcher = BindWatcher(api, "ns", time.monotonic)
    watcher.start()
    records = create_pods(
        api, manifests(n), arrival, TokenBucket(0, 0), watcher, time.monotonic,
        deadline=time.monotonic() + 10,
    )  # fmt: skip
    watcher.wait([r.name for r in records if r.error is None], time.monotonic() + 5)
    finish(records, watcher)
    watcher.stop()
    return records, watcher


def test_a_pod_placed_at_admission_is_bound_when_its_create_returns() -> None:
    records, _ = run(FakeApi(bind_on_create=True), Arrival("burst", clients=3))

    assert all(r.placed_at_create and r.bound == r.created and r.node == "n1" for r in records)


def test_a_pod_bound_later_is_seen_through_the_watch() -> None:
    records, _ = run(FakeApi(bind_on_create=False, delay=0.01), Arrival("burst", clients=2))

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
    api = FakeApi(bind_on_create=True, fail={"p2"})

    records, _ = run(api, Arrival("burst", clients=2))

    failed = [r for r in records if r.error]
    assert [r.name for r in failed] == ["p2"]
    assert len(api.created) == 5
