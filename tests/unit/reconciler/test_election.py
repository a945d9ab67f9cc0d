"""Lease-based leader election with client-go's rules, on an in-memory Lease store.

(The e2e tests run the same code against a real kube-apiserver; here a
small store with resourceVersion preconditions makes the timing exact.)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import pytest

from webhook.reconciler.election import (
    ElectionSettings,
    LeaderElector,
    LeaseLock,
    LeaseRecord,
    may_take,
    next_record,
)

SETTINGS = ElectionSettings(lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)


class ApiError(Exception):
    def __init__(self, status: int):
        super().__init__(f"HTTP {status}")
        self.status = status
        self.is_conflict = status == 409
        self.is_not_found = status == 404


class LeaseStore:
    """One Lease with resourceVersion preconditions, as the API server keeps it."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.down = False
        self.frozen: dict[str, Any] | None = None

    def request(
        self, method: str, path: str, *, body: Any = None, **_: Any
    ) -> dict[str, Any]:  # fmt: skip
        if self.down:
            raise ApiError(503)
        if method == "GET":
            if self.lease is None:
                raise ApiError(404)
            return self.frozen or self.lease
        if method == "POST":
            if self.lease is not None:
                raise ApiError(409)
            return self._store(body)
        assert method == "PUT"
        if self.lease is None:
            raise ApiError(404)
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409)
        return self._store(body)

    def _store(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.version += 1
        self.lease = {
            "metadata": {**body["metadata"], "resourceVersion": str(self.version)},
            "spec": dict(body["spec"]),
        }
        return self.lease

    @property
    def holder(self) -> str:
        return str((self.lease or {}).get("spec", {}).get("holderIdentity") or "")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def candidate(store: LeaseStore, clock: Clock, name: str) -> LeaderElector:
    return LeaderElector(
        LeaseLock(store, "ns", "lease"),
        name,
        SETTINGS,
        clock=clock,
        wall=lambda: dt.datetime(2024, 5, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=clock.now),
        rand=lambda: 0.0,
    )


def test_the_first_candidate_creates_the_lease_and_leads() -> None:
    store, clock = LeaseStore(), Clock()
    a = candidate(store, clock, "a")
    a.step()
    assert a.is_leader()
    assert store.holder == "a"
    assert store.lease is not None and store.lease["spec"]["leaseDurationSeconds"] == 15


def test_a_standby_does_not_take_a_lease_that_is_renewed() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = candidate(store, clock, "a"), candidate(store, clock, "b")
    a.step()
    for _ in range(20):
        clock.now += 2.0
        a.step()
        b.step()
        assert a.is_leader() and not b.is_leader()
    assert store.holder == "a"


def test_a_standby_takes_over_one_lease_duration_after_it_last_saw_a_change() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = candidate(store, clock, "a"), candidate(store, clock, "b")
    a.step()
    b.step()  # b observes a's record at t=1000
    clock.now += 14.9
    b.step()
    assert not b.is_leader()
    clock.now += 0.1
    b.step()
    assert b.is_leader() and store.holder == "b"
    assert store.lease is not None and store.lease["spec"]["leaseTransitions"] == 1


def test_a_leader_that_cannot_renew_stops_acting_at_the_renew_deadline() -> None:
    store, clock = LeaseStore(), Clock()
    a = candidate(store, clock, "a")
    a.step()
    store.down = True
    clock.now += 9.9
    a.step()
    assert a.is_leader()
    clock.now += 0.1
    assert not a.is_leader()  # at once, before the loop runs again


def test_a_leader_whose_lease_was_taken_stops_at_once() -> None:
    store, clock = LeaseStore(), Clock()
    a = candidate(store, clock, "a")
    a.step()
    assert store.lease is not None
    store.lease["spec"]["holderIdentity"] = "intruder"
    store.version += 1
    store.lease["metadata"]["resourceVersion"] = str(store.version)
    clock.now += 2.0
    a.step()
    assert not a.is_leader()


def test_of_two_standbys_racing_for_an_expired_lease_only_one_wins() -> None:
    store, clock = LeaseStore(), Clock()
    a, b, c = (candidate(store, clock, n) for n in "abc")
    a.step()
    b.step()
    c.step()
    clock.now += 15.0
    store.frozen = store.lease  # both read the expired record before either writes
    b.step()
    c.step()
    assert [b.is_leader(), c.is_leader()] == [True, False]
    assert store.holder == "b"


def test_a_released_lease_is_taken_at_the_next_attempt() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = candidate(store, clock, "a"), candidate(store, clock, "b")
    a.step()
    b.step()
    a.stop(release=True)
    assert store.holder == "" and not a.is_leader()
    clock.now += 2.0
    b.step()
    assert b.is_leader()


def test_renewal_keeps_the_acquire_time_and_a_takeover_bumps_the_transitions() -> None:
    old = LeaseRecord("a", 15, "t0", "t1", 3)
    assert next_record(old, "a", 15, "t2") == LeaseRecord("a", 15, "t0", "t2", 3)
    assert next_record(old, "b", 15, "t2") == LeaseRecord("b", 15, "t2", "t2", 4)
    assert next_record(None, "b", 15, "t2") == LeaseRecord("b", 15, "t2", "t2", 0)


@pytest.mark.parametrize(
    ("holder", "observed_at", "now", "allowed"),
    [("", 0.0, 0.0, True), ("me", 0.0, 0.0, True), ("other", 0.0, 14.9, False),
     ("other", 0.0, 15.0, True)],
)  # fmt: skip
def test_who_may_take_the_lease(holder: str, observed_at: float, now: float, allowed: bool) -> None:
    record = LeaseRecord(holder, 15, "t", "t", 0)
    assert may_take(record, observed_at, "me", now) is allowed


def test_settings_follow_client_go_validation() -> None:
    with pytest.raises(ValueError, match="lease duration"):
        ElectionSettings(lease_duration=10.0, renew_deadline=10.0)
    with pytest.raises(ValueError, match=r"1\.2 x retry"):
        ElectionSettings(lease_duration=15.0, renew_deadline=2.0, retry_period=2.0)
    assert SETTINGS.act_margin == 5.0


def test_each_leader_knows_how_it_took_the_lease_and_publishes_its_address() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = candidate(store, clock, "a"), candidate(store, clock, "b")
    a.advertise_url = "https://10.0.0.1:8443"
    a.step()
    assert a.last_takeover is not None and a.last_takeover.how == "created"
    b.step()
    assert b.leader_url() == "https://10.0.0.1:8443"  # a follower learns where to forward
    clock.now += 15.0
    b.step()
    assert b.is_leader() and b.last_takeover is not None
    assert (b.last_takeover.how, b.last_takeover.previous.holder) == ("expired", "a")
    assert b.leader_url() == ""  # b publishes no address of its own here
    assert b.release()
    a2 = candidate(store, clock, "a")
    a2.step()
    assert a2.is_leader() and a2.last_takeover is not None
    assert a2.last_takeover.how == "released"


def test_a_restarted_process_that_finds_its_own_name_on_the_lease_is_not_told_it_waited() -> None:
    store, clock = LeaseStore(), Clock()
    candidate(store, clock, "a").step()
    again = candidate(store, clock, "a")  # the same identity after a restart, at once
    again.step()
    assert again.is_leader() and again.last_takeover is not None
    assert again.last_takeover.how == "resumed"
