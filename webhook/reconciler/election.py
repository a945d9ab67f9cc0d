"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules.

- A candidate reads the Lease. It may take it when nobody holds it, or
  when the record it observed has not changed for a whole
  `leaseDurationSeconds` measured on its *own* clock from the moment it
  observed it (so clocks need not agree, only run at similar rates).
- Every write carries the resourceVersion that was read: of two candidates
  racing for an expired lease, the API server lets exactly one win (409 for
  the other).
- The leader renews every `retry_period`, optimistically with the last
  resourceVersion it wrote (one PUT, no GET), falling back to read-then-write.
- The leader may act only until `renew_deadline` after the start of its last
  successful renewal; it stops binding at that instant, even if the
  renewal call is still hanging. Since the others wait `lease_duration`
  from a later instant, there is a `lease_duration - renew_deadline` margin in
  which no two leaders act; a bind request is given at most that long.
- On shutdown the leader releases the lease (empty holder, duration 1 s),
  so a standby takes over at its next retry instead of after a lease duration.
- The holder publishes where it answers (annotation
  `placement-webhook.io/leader-url`), so webhook followers can hand their
  admission reviews to the one replica that decides.

`LeaseRecord`, `next_record` and `may_take` are pure; `LeaseLock` and
`LeaderElector` are the shell.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from webhook import bodies
from webhook.kube import Requester

log = logging.getLogger(__name__)

JITTER = 1.2  # client-go's JitterFactor for the acquire loop
LEADER_URL_ANNOTATION = "placement-webhook.io/leader-url"


@dataclass(frozen=True)
class ElectionSettings:
    lease_duration: float = 15.0
    """Seconds a standby waits, from when it last saw the lease change, before taking it."""
    renew_deadline: float = 10.0
    """Seconds the leader keeps acting without a successful renewal."""
    retry_period: float = 2.0
    """Seconds between renewals, and between acquire attempts."""

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline:
            raise ValueError("leader election: lease duration must exceed the renew deadline")
        if not self.renew_deadline > JITTER * self.retry_period:
            raise ValueError("leader election: renew deadline must exceed 1.2 x retry period")
        if self.retry_period <= 0:
            raise ValueError("leader election: retry period must be positive")

    @property
    def act_margin(self) -> float:
        """How long one action (a bind) may take without outliving leadership."""
        return self.lease_duration - self.renew_deadline


@dataclass(frozen=True)
class LeaseRecord:
    holder: str
    duration_seconds: int
    acquire_time: str
    renew_time: str
    transitions: int
    leader_url: str = ""
    """Where the holder answers forwarded admission reviews ("" when it does not)."""

    @staticmethod
    def from_lease(lease: Mapping[str, Any]) -> LeaseRecord:
        spec = bodies.spec(lease)
        annotations = bodies.annotations_of(lease)
        return LeaseRecord(
            holder=str(spec.get("holderIdentity") or ""),
            duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=str(spec.get("acquireTime") or ""),
            renew_time=str(spec.get("renewTime") or ""),
            transitions=int(spec.get("leaseTransitions") or 0),
            leader_url=str(annotations.get(LEADER_URL_ANNOTATION) or ""),
        )

    def to_spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder or None,
            "leaseDurationSeconds": self.duration_seconds,
            "acquireTime": self.acquire_time or None,
            "renewTime": self.renew_time or None,
            "leaseTransitions": self.transitions,
        }


@dataclass(frozen=True)
class Takeover:
    """How this process came to hold the lease (what a new leader must wait for)."""

    how: str
    """created: no lease existed; released: the holder gave it up; expired: it stopped
    renewing; resumed: the lease still named this identity (a restart)."""
    previous: LeaseRecord | None = None
    """The record this process replaced (None when it created the lease)."""


def micro_time(now: dt.datetime) -> str:
    """metav1.MicroTime's wire format."""
    return now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: str) -> float | None:
    """A MicroTime (or a Time) as seconds since the epoch; None when it is not one."""
    for layout in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return dt.datetime.strptime(text, layout).replace(tzinfo=dt.UTC).timestamp()
        except (TypeError, ValueError):
            continue
    return None


def may_take(
    observed: LeaseRecord, observed_at: float, identity: str, now: float
) -> bool:  # fmt: skip
    """Whether `identity` may write the lease now (client-go's step 3)."""
    if not observed.holder or observed.holder == identity:
        return True
    return observed_at + observed.duration_seconds <= now


def next_record(
    observed: LeaseRecord | None,
    identity: str,
    duration_seconds: int,
    stamp: str,
    leader_url: str = "",
) -> LeaseRecord:
    """The record to write: a renewal keeps acquireTime and transitions, a takeover bumps them."""
    if observed is not None and observed.holder == identity:
        return replace(
            observed, duration_seconds=duration_seconds, renew_time=stamp, leader_url=leader_url
        )
    transitions = observed.transitions + 1 if observed is not None else 0
    return LeaseRecord(identity, duration_seconds, stamp, stamp, transitions, leader_url)


# ------------------------------------------------------------------ shell


class LeaseLock:
    """Get/create/update one Lease, with resourceVersion preconditions."""

    def __init__(self, client: Requester, namespace: str, name: str, *, timeout: float = 5.0):
        self.client, self.namespace, self.name, self.timeout = client, namespace, name, timeout

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    def get(self) -> tuple[LeaseRecord, str] | None:
        """(record, resourceVersion), or None when the lease does not exist."""
        try:
            lease = self.client.request("GET", f"{self.path}/{self.name}", timeout=self.timeout)
        except Exception as err:
            if getattr(err, "is_not_found", False):
                return None
            raise
        return LeaseRecord.from_lease(lease), str(lease["metadata"]["resourceVersion"])

    def create(self, record: LeaseRecord) -> str:
        body = self._body(record, None)
        lease = self.client.request("POST", self.path, body=body, timeout=self.timeout)
        return str(lease["metadata"]["resourceVersion"])

    def update(self, record: LeaseRecord, resource_version: str) -> str:
        body = self._body(record, resource_version)
        lease = self.client.request(
            "PUT", f"{self.path}/{self.name}", body=body, timeout=self.timeout
        )
        return str(lease["metadata"]["resourceVersion"])

    def _body(self, record: LeaseRecord, resource_version: str | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        url = record.leader_url
        meta["annotations"] = {LEADER_URL_ANNOTATION: url} if url else {}
        if resource_version is not None:
            meta["resourceVersion"] = resource_version
        spec = {k: v for k, v in record.to_spec().items() if v is not None}
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": spec,
        }


class LeaderElector:
    """Runs the election on a thread; `is_leader()` says whether to act right now."""

    def __init__(
        self,
        lock: LeaseLock,
        identity: str,
        settings: ElectionSettings = ElectionSettings(),
        *,
        on_started: Callable[[], None] = lambda: None,
        on_stopped: Callable[[], None] = lambda: None,
        on_new_leader: Callable[[str], None] = lambda _holder: None,
        advertise_url: str = "",
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        rand: Callable[[], float] = random.random,
    ):
        self.lock, self.identity, self.settings = lock, identity, settings
        self.on_started, self.on_stopped, self.on_new_leader = on_started, on_stopped, on_new_leader
        self.clock, self.wall, self.rand = clock, wall, rand
        self.advertise_url = advertise_url
        self._guard = threading.Lock()
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._version: str | None = None
        self._leading = False
        self._valid_until = 0.0
        self._reported_holder = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self.last_takeover: Takeover | None = None
        """Set when this process takes the lease, before `on_started` runs."""
        self.transitions_seen = 0

    # ---- reading -------------------------------------------------------
    def is_leader(self) -> bool:
        with self._guard:
            return self._leading and self.clock() < self._valid_until

    def holder(self) -> str:
        with self._guard:
            return self._observed.holder if self._observed else ""

    def leader_url(self) -> str:
        """Where the current holder (as last observed) answers forwarded reviews, or ""."""
        with self._guard:
            return self._observed.leader_url if self._observed else ""

    def leading_for(self) -> float:
        """Seconds of leadership left without another renewal (0 when not leading)."""
        with self._guard:
            return max(0.0, self._valid_until - self.clock()) if self._leading else 0.0

    # ---- lifecycle -----------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self, release: bool = True, timeout: float = 5.0) -> None:
        """Stop electing; when leading, stop acting at once and release the lease."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        was_leading = self._set_leading(False)
        if release and was_leading:
            self.release()

    def release(self) -> bool:
        with self._guard:
            observed, version = self._observed, self._version
        if observed is None or observed.holder != self.identity or version is None:
            return False
        stamp = micro_time(self.wall())
        record = LeaseRecord("", 1, stamp, stamp, observed.transitions)  # no url: nobody leads
        try:
            self.lock.update(record, version)
        except Exception as err:
            log.warning("could not release lease %s: %s", self.lock.describe(), err)
            return False
        log.info("released lease %s", self.lock.describe())
        return True

    # ---- the loop ------------------------------------------------------
    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this identity holds the lease afterwards."""
        start = self.clock()
        duration = max(1, round(self.settings.lease_duration))
        stamp = micro_time(self.wall())
        with self._guard:
            observed, version, leading = self._observed, self._version, self._leading
        url = self.advertise_url
        if leading and observed is not None and version is not None:
            record = next_record(observed, self.identity, duration, stamp, url)
            try:  # fast path: the leader writes over what it wrote last
                self._wrote(record, self.lock.update(record, version), start)
                return True
            except Exception as err:
                log.info("optimistic renewal failed (%s); reading the lease", err)
        try:
            current = self.lock.get()
            if current is None:
                record = next_record(None, self.identity, duration, stamp, url)
                self._wrote(record, self.lock.create(record), start)
                self.last_takeover = Takeover("created")
                return True
            seen, seen_version = current
            now = self.clock()
            with self._guard:
                if seen != self._observed:
                    self._observed, self._observed_at = seen, now
                self._version = seen_version
                observed_at = self._observed_at
            self._report_holder(seen.holder)
            if not may_take(seen, observed_at, self.identity, now):
                return False
            record = next_record(seen, self.identity, duration, stamp, url)
            self._wrote(record, self.lock.update(record, seen_version), start)
            if not leading:
                if not seen.holder:
                    how = "released"
                elif seen.holder == self.identity:
                    how = "resumed"  # our own name from before a restart: it may just have decided
                else:
                    how = "expired"
                self.last_takeover = Takeover(how, seen)
            return True
        except Exception as err:
            if getattr(err, "is_conflict", False):
                log.info("lost a race for lease %s", self.lock.describe())
            else:
                log.warning("lease %s: %s", self.lock.describe(), err)
            return False

    def _wrote(self, record: LeaseRecord, version: str, started: float) -> None:
        with self._guard:
            self._observed, self._observed_at, self._version = record, self.clock(), version
            self._valid_until = started + self.settings.renew_deadline
        self._report_holder(record.holder)

    def _report_holder(self, holder: str) -> None:
        if holder != self._reported_holder:
            self._reported_holder = holder
            self.transitions_seen += 1
            log.info("lease %s is held by %r", self.lock.describe(), holder or None)
            self.on_new_leader(holder)

    def _set_leading(self, leading: bool) -> bool:
        """Set the state; returns the previous one, and runs the callback on a change."""
        with self._guard:
            was = self._leading
            self._leading = leading
            if not leading:
                self._valid_until = 0.0
        if was != leading:
            log.info("%s leading (%s)", "started" if leading else "stopped", self.identity)
            (self.on_started if leading else self.on_stopped)()
        return was

    def step(self) -> float:
        """One round: acquire or renew, update the leading state; returns seconds to wait."""
        period = self.settings.retry_period
        if self.try_acquire_or_renew():
            self._set_leading(True)
            return period
        with self._guard:
            holder = self._observed.holder if self._observed is not None else ""
            taken = holder not in ("", self.identity)
            expired = self.clock() >= self._valid_until
        if taken or expired:
            self._set_leading(False)
        if self.is_leader():
            return period  # keep retrying the renewal until the deadline
        return period * (1 + (JITTER - 1) * self.rand())

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._stop.wait(self.step()):
                break
