"""The pending-pod queue behaves like kube-scheduler's: backoff, unschedulable, event moves."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.reconciler.queue import (
    ACTIVE,
    BACKOFF,
    IN_FLIGHT,
    UNSCHEDULABLE,
    BackoffSettings,
    ClusterEvent,
    SchedulingQueue,
    backoff_duration,
    event_may_help,
)

INSUFFICIENT_CPU = "Insufficient cpu"
TAINT = "node(s) had untolerated taint(s)"
AFFINITY = "node(s) didn't match pod affinity rules"
SPREAD = "node(s) didn't match pod topology spread constraints"


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": name}}


def queue_with(*names: str, now: float = 0.0) -> SchedulingQueue:
    q = SchedulingQueue()
    for name in names:
        q.add(name, pod(name), now=now)
    return q


def fail(
    q: SchedulingQueue, key: str, now: float, reasons: tuple[str, ...] = (INSUFFICIENT_CPU,)
) -> None:
    attempt = q.pop(now)
    assert attempt is not None and attempt.key == key
    q.unschedulable(key, now, reasons)


@pytest.mark.parametrize(
    ("attempts", "seconds"), [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (9, 10.0)]
)
def test_backoff_doubles_from_one_second_up_to_ten(attempts: int, seconds: float) -> None:
    assert backoff_duration(attempts, BackoffSettings()) == seconds


def test_pods_are_tried_in_arrival_order_within_a_priority() -> None:
    q = queue_with("a", "b", "c")
    assert [q.pop(0.0).key for _ in range(3)] == ["a", "b", "c"]  # type: ignore[union-attr]
    assert q.pop(0.0) is None


def test_higher_priority_pods_are_tried_first() -> None:
    q = SchedulingQueue()
    q.add("low", pod("low"), now=0.0, priority=0)
    q.add("high", pod("high"), now=0.0, priority=1000)
    assert q.pop(0.0).key == "high"  # type: ignore[union-attr]


def test_an_unschedulable_pod_waits_for_a_cluster_event_not_for_a_timer() -> None:
    q = queue_with("a")
    fail(q, "a", 0.0)
    assert q.where("a") == UNSCHEDULABLE
    assert q.pop(30.0) is None


def test_a_node_added_moves_it_back_once_its_backoff_has_passed() -> None:
    q = queue_with("a")
    fail(q, "a", 0.0)
    q.on_event(ClusterEvent.NODE_ADD, 5.0)
    assert q.where("a") == ACTIVE
    assert q.pop(5.0).key == "a"  # type: ignore[union-attr]


def test_an_event_during_its_backoff_moves_it_to_backoff_first() -> None:
    q = queue_with("a")
    fail(q, "a", 0.0)
    q.on_event(ClusterEvent.NODE_ADD, 0.5)
    assert q.where("a") == BACKOFF
    assert q.pop(0.9) is None
    assert q.pop(1.0).key == "a"  # type: ignore[union-attr]


def test_the_backoff_grows_with_each_failed_attempt() -> None:
    q = queue_with("a")
    for now in (0.0, 1.0, 3.0):
        q.on_event(ClusterEvent.NODE_ADD, now)
        fail(q, "a", now)
    assert q.backoff_until("a") == 3.0 + 4.0


def test_a_cluster_event_while_the_pod_is_tried_sends_it_to_backoff_not_to_unschedulable() -> None:
    q = queue_with("a")
    attempt = q.pop(0.0)
    assert attempt is not None
    q.on_event(ClusterEvent.NODE_ADD, 0.1)
    q.unschedulable("a", 0.2, (INSUFFICIENT_CPU,))
    assert q.where("a") == BACKOFF
    assert q.pop(1.2).key == "a"  # type: ignore[union-attr]


def test_a_cluster_event_before_the_pod_is_tried_does_not_spare_it_the_unschedulable_wait() -> None:
    q = queue_with("a")
    q.on_event(ClusterEvent.NODE_ADD, 0.0)
    fail(q, "a", 0.1)
    assert q.where("a") == UNSCHEDULABLE


def test_a_pod_deleted_does_not_help_a_pod_rejected_only_by_taints() -> None:
    q = queue_with("tainted", "full")
    fail(q, "tainted", 0.0, (TAINT,))
    fail(q, "full", 0.0, (INSUFFICIENT_CPU, TAINT))
    assert q.on_event(ClusterEvent.ASSIGNED_POD_DELETE, 5.0) == 1
    assert (q.where("tainted"), q.where("full")) == (UNSCHEDULABLE, ACTIVE)


@pytest.mark.parametrize(
    ("event", "reasons", "helps"),
    [
        (ClusterEvent.NODE_ADD, [TAINT], True),
        (ClusterEvent.NODE_UPDATE, [], True),
        (ClusterEvent.ASSIGNED_POD_DELETE, [INSUFFICIENT_CPU], True),
        (ClusterEvent.ASSIGNED_POD_DELETE, ["Too many pods"], True),
        (ClusterEvent.ASSIGNED_POD_DELETE, [TAINT], False),
        (ClusterEvent.ASSIGNED_POD_DELETE, [], False),
        (ClusterEvent.ASSIGNED_POD_ADD, [INSUFFICIENT_CPU], False),
        (ClusterEvent.ASSIGNED_POD_ADD, [AFFINITY], True),
        (ClusterEvent.ASSIGNED_POD_ADD, [SPREAD], True),
        (ClusterEvent.ASSIGNED_POD_ADD, [SPREAD + " (missing required label)"], False),
    ],
)  # fmt: skip
def test_queueing_hints(event: ClusterEvent, reasons: list[str], helps: bool) -> None:
    assert event_may_help(event, reasons) is helps


def test_an_update_to_the_pods_spec_moves_it_but_a_status_update_does_not() -> None:
    q = SchedulingQueue()
    q.add("a", pod("a"), now=0.0, signature="v1")
    fail(q, "a", 0.0)
    q.add("a", pod("a"), now=5.0, signature="v1")
    assert q.where("a") == UNSCHEDULABLE
    q.add("a", pod("a"), now=5.0, signature="v2")
    assert q.where("a") == ACTIVE


def test_an_unschedulable_pod_is_retried_anyway_after_the_longest_wait() -> None:
    q = SchedulingQueue(BackoffSettings(max_unschedulable=60.0))
    q.add("a", pod("a"), now=0.0)
    fail(q, "a", 0.0)
    assert q.next_ready_in(0.0) == 60.0
    assert q.pop(59.0) is None
    assert q.pop(60.0).key == "a"  # type: ignore[union-attr]


def test_next_ready_says_when_a_backoff_ends() -> None:
    q = queue_with("a")
    q.pop(0.0)
    q.error("a", 0.0)
    assert q.where("a") == BACKOFF
    assert q.next_ready_in(0.25) == 0.75


def test_a_deleted_pod_is_never_handed_out() -> None:
    q = queue_with("a", "b")
    q.delete("a")
    assert q.pop(0.0).key == "b"  # type: ignore[union-attr]
    assert q.pop(0.0) is None


def test_a_pod_given_back_untried_keeps_its_attempt_count() -> None:
    q = queue_with("a")
    fail(q, "a", 0.0)
    q.on_event(ClusterEvent.NODE_ADD, 2.0)
    attempt = q.pop(2.0)
    assert attempt is not None and attempt.attempts == 1
    q.give_back("a", 2.0)
    again = q.pop(2.0)
    assert again is not None and again.attempts == 1


def test_gaining_leadership_retries_every_unschedulable_pod() -> None:
    q = queue_with("a", "b")
    fail(q, "a", 0.0)
    fail(q, "b", 0.0)
    q.activate_all(10.0)
    assert q.counts() == {ACTIVE: 2, BACKOFF: 0, UNSCHEDULABLE: 0, IN_FLIGHT: 0}


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="initial"):
        BackoffSettings(initial=5.0, maximum=1.0)
