"""The decision authority: who decides, and when a new leader may start."""

from __future__ import annotations

import threading

import pytest

from webhook.reconciler.authority import AuthoritySettings, DecisionAuthority, Route


class Clock:
    """Fake time that the authority's own waiting advances."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.now += max(seconds, 0.001)


class Elector:
    def __init__(self, leader: bool = False, url: str = "", holder: str = "") -> None:
        self.leader, self.url, self.holder_name = leader, url, holder

    def is_leader(self) -> bool:
        return self.leader

    def leader_url(self) -> str:
        return self.url

    def holder(self) -> str:
        return self.holder_name


SETTINGS = AuthoritySettings(webhook_timeout=2.0, grace=1.0, barrier_wait=1.0)


def authority(elector: Elector, clock: Clock, pod_rv: list[str], current: str = "100",
              own_url: str = "https://me:8443") -> DecisionAuthority:  # fmt: skip
    return DecisionAuthority(
        elector,
        pod_resource_version=lambda: pod_rv[0],
        current_resource_version=lambda: current,
        settings=SETTINGS,
        own_url=own_url,
        clock=clock,
        sleep=clock.sleep,
    )


def take_lead(auth: DecisionAuthority, elector: Elector) -> None:
    elector.leader = True
    auth.started_leading()
    assert auth._gate is not None
    auth._gate.join(5)


def test_a_follower_forwards_to_the_published_leader() -> None:
    auth = authority(Elector(url="https://leader:8443", holder="b"), Clock(), ["1"])
    assert auth.route() == (Route.FORWARD, "https://leader:8443")
    assert not auth.may_decide()


@pytest.mark.parametrize(
    ("elector", "why"),
    [
        (Elector(), "no replica leads"),
        (Elector(holder="reconciler-1"), "publishes no address"),
    ],
)
def test_without_a_leader_to_forward_to_the_pod_is_handed_off(elector: Elector, why: str) -> None:
    route, reason = authority(elector, Clock(), ["1"]).route()
    assert route is Route.HAND_OFF and why in reason


def test_a_new_leader_waits_the_webhook_timeout_and_grace_then_for_its_watch() -> None:
    clock, elector, pod_rv = Clock(), Elector(), ["90"]
    auth = authority(elector, clock, pod_rv, current="100")
    elector.leader = True
    assert auth.route()[0] is Route.HAND_OFF  # not started: catching up

    take_lead(auth, elector)

    # The watch never reached 100 here: the bounded wait ends the gate.
    assert auth.may_decide()
    assert auth.fresh_after is not None
    assert auth.fresh_after >= SETTINGS.webhook_timeout + SETTINGS.grace + SETTINGS.barrier_wait
    assert auth.route() == (Route.DECIDE, "")


def test_a_watch_past_the_barrier_ends_the_wait_early() -> None:
    clock, elector = Clock(), Elector()
    auth = authority(elector, clock, ["150"], current="100")
    take_lead(auth, elector)
    assert auth.may_decide()
    assert auth.fresh_after is not None
    assert auth.fresh_after < SETTINGS.webhook_timeout + SETTINGS.grace + SETTINGS.barrier_wait


def test_losing_the_lease_stops_decisions_at_once_and_a_new_term_waits_again() -> None:
    clock, elector = Clock(), Elector()
    auth = authority(elector, clock, ["150"])
    take_lead(auth, elector)
    assert auth.may_decide()

    elector.leader = False
    assert not auth.may_decide()  # the elector's own validity ends it immediately
    auth.stopped_leading()
    elector.leader = True
    assert not auth.may_decide()  # a stale "fresh" never carries over to a new term
    take_lead(auth, elector)
    assert auth.may_decide()


def test_a_review_is_never_forwarded_to_this_replica_itself() -> None:
    auth = authority(Elector(url="https://me:8443", holder="me"), Clock(), ["1"])
    assert auth.route()[0] is Route.HAND_OFF
