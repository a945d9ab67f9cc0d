"""The reservation ledger: how a reservation ends, and the cap on unconfirmed ones."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.cluster.ledger import ADMISSION, BINDER, EXTENDER, Ledger
from webhook.policy.dump import build_snapshot
from webhook.policy.model import PodView
from webhook.policy.snapshot import ClusterSnapshot


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def node(name: str, cpu: str = "4", pods: str = "110") -> dict[str, Any]:
    capacity = {"cpu": cpu, "memory": "8Gi", "pods": pods}
    return {"metadata": {"name": name}, "status": {"allocatable": capacity}}


def pod(name: str, cpu: str = "1") -> PodView:
    return PodView.from_dict({
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
    })  # fmt: skip


def requested_cpu(snapshot: ClusterSnapshot, name: str) -> int:
    slot = snapshot.slot_of(name)
    assert slot is not None
    return int(snapshot.requested[slot, 0])


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def snapshot() -> ClusterSnapshot:
    return build_snapshot([node("a"), node("b")], [])


def test_a_reservation_counts_its_pod_until_it_is_fulfilled(
    snapshot: ClusterSnapshot, clock: Clock
) -> None:
    ledger = Ledger(snapshot, clock=clock)
    ledger.reserve("k", pod("p", "2"), "a", hold_for=5, origin=ADMISSION)
    assert requested_cpu(snapshot, "a") == 2000
    assert ledger.fulfil("k") is not None
    assert requested_cpu(snapshot, "a") == 0
    assert ledger.fulfil("k") is None  # once only
    assert (ledger.fulfilled, ledger.released, ledger.expired) == (1, 0, 0)


def test_an_unmatched_reservation_expires_at_its_deadline_and_not_before(
    snapshot: ClusterSnapshot, clock: Clock
) -> None:
    ledger = Ledger(snapshot, clock=clock)
    ledger.reserve("k", pod("p"), "a", hold_for=5, origin=ADMISSION)
    clock.now = 4.999
    assert ledger.expire() == []
    clock.now = 5.0
    assert [r.key for r in ledger.expire()] == ["k"]
    assert requested_cpu(snapshot, "a") == 0 and len(ledger) == 0


def test_reserving_a_key_again_replaces_it_and_its_deadline(
    snapshot: ClusterSnapshot, clock: Clock
) -> None:
    ledger = Ledger(snapshot, clock=clock)
    ledger.reserve("k", pod("p", "1"), "a", hold_for=5, origin=ADMISSION)
    clock.now = 4
    ledger.reserve("k", pod("p", "3"), "b", hold_for=5, origin=ADMISSION)
    assert (requested_cpu(snapshot, "a"), requested_cpu(snapshot, "b")) == (0, 3000)
    clock.now = 6  # past the first deadline, not the second: the stale heap entry is skipped
    assert ledger.expire() == []
    clock.now = 9
    assert [r.node for r in ledger.expire()] == ["b"]


def test_a_released_reservation_frees_its_slot_at_once(
    snapshot: ClusterSnapshot, clock: Clock
) -> None:
    ledger = Ledger(snapshot, clock=clock)
    ledger.reserve("k", pod("p"), "a", hold_for=5, origin=BINDER)
    assert ledger.release("k") is not None
    assert requested_cpu(snapshot, "a") == 0 and ledger.released == 1


def test_the_share_cap_counts_admission_reservations_only_and_lets_the_first_through(
    snapshot: ClusterSnapshot, clock: Clock
) -> None:
    ledger = Ledger(snapshot, clock=clock, max_unconfirmed_share=0.5)  # 8 cpu: 4 may wait
    big = pod("big", "6")
    assert ledger.admits(big)  # the first always passes
    ledger.reserve("big", big, "a", hold_for=5, origin=ADMISSION)
    assert not ledger.admits(pod("next", "1"))
    assert ledger.admits(pod("bind", "1"), BINDER) and ledger.admits(pod("ext", "1"), EXTENDER)
    ledger.fulfil("big")
    assert ledger.admits(pod("next", "7"))  # nothing waits any more: the first passes again
    ledger.reserve("small", pod("small", "1"), "a", hold_for=5, origin=ADMISSION)
    assert ledger.admits(pod("next", "3")) and not ledger.admits(pod("next", "4"))


def test_the_share_cap_also_bounds_the_number_of_waiting_pods(clock: Clock) -> None:
    snapshot = build_snapshot([node("a", cpu="100", pods="4")], [])
    ledger = Ledger(snapshot, clock=clock, max_unconfirmed_share=0.5)
    for i in range(2):
        assert ledger.admits(pod(f"p{i}", "0"))
        ledger.reserve(f"p{i}", pod(f"p{i}", "0"), "a", hold_for=5, origin=ADMISSION)
    assert not ledger.admits(pod("p2", "0"))


def test_a_share_outside_zero_to_one_is_refused(snapshot: ClusterSnapshot) -> None:
    with pytest.raises(ValueError):
        Ledger(snapshot, clock=Clock(), max_unconfirmed_share=0)
