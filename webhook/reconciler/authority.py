"""One decision authority per cluster: who may place a pod right now.

In `nodeName` mode nothing after us re-checks a decision but the kubelet,
whose answer to a double-booked node is a terminal `OutOfcpu`; two processes
that each count only their own reservations will double-book. So exactly one
process decides at any moment: the holder of the Lease (webhook.reconciler.
election), which runs admission decisions and the fallback binder against one
reservation ledger. Every other replica routes its reviews to it.

A process that just took the Lease does not decide at once. The previous
holder may have answered reviews whose pods are not in our view yet: the API
server persists a pod only after the rest of its admission chain, and our
watch delivers it a moment later. So a new leader waits

1. until the API server's webhook timeout plus a grace has passed since it
   took the Lease (an answer the old leader gave later than that was thrown
   away by the API server), then
2. until its pod watch has delivered everything up to a resourceVersion read
   from the API server *after* step 1 (a consistent read), or, when no pod
   changed since (no event can arrive to prove it), for a bounded time.

Until then reviews are handed to the fallback binder, which itself waits for
the same gate. The previous holder stopped acting `renew_deadline` after its
last renewal, before anyone could take the Lease (client-go's rule, kept by
the elector); a holder that lost the Lease stops deciding at that instant.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)


class Route(enum.StrEnum):
    DECIDE = "decide"
    FORWARD = "forward"
    HAND_OFF = "hand-off"


@dataclass(frozen=True)
class AuthoritySettings:
    webhook_timeout: float = 2.0
    """The API server's timeout for our webhook (timeoutSeconds of the configuration)."""
    grace: float = 1.0
    """Added to the webhook timeout before a new leader trusts its view."""
    barrier_wait: float = 1.0
    """How long a new leader waits for its watch to reach the barrier resourceVersion."""


class Elector(Protocol):
    """What the authority needs of the leader elector."""

    def is_leader(self) -> bool: ...

    def leader_url(self) -> str: ...

    def holder(self) -> str: ...


class DecisionAuthority:
    """Leader plus freshness gate; `route()` says what to do with a review now."""

    def __init__(
        self,
        elector: Elector,
        *,
        pod_resource_version: Callable[[], str],
        current_resource_version: Callable[[], str],
        settings: AuthoritySettings = AuthoritySettings(),
        own_url: str = "",
        on_fresh: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.elector, self.settings, self.own_url, self.clock = elector, settings, own_url, clock
        self.on_fresh, self.sleep = on_fresh, sleep
        self._pod_rv = pod_resource_version
        self._current_rv = current_resource_version
        self._lock = threading.Lock()
        self._term = 0
        self._fresh = False
        self._since = 0.0
        self._gate: threading.Thread | None = None
        self.fresh_after: float | None = None
        """Seconds the last takeover waited before deciding (for logs and metrics)."""

    # ---- elector callbacks ---------------------------------------------
    def started_leading(self) -> None:
        with self._lock:
            self._term += 1
            term, self._fresh, self._since = self._term, False, self.clock()
        self._gate = threading.Thread(
            target=self._establish, args=(term,), name="authority-gate", daemon=True
        )
        self._gate.start()

    def stopped_leading(self) -> None:
        with self._lock:
            self._term += 1
            self._fresh = False

    # ---- reading -------------------------------------------------------
    def may_decide(self) -> bool:
        """True while this process holds the Lease and its view is fresh past the takeover."""
        with self._lock:
            fresh = self._fresh
        return fresh and self.elector.is_leader()

    def route(self) -> tuple[Route, str]:
        """(DECIDE, ""), (FORWARD, leader url) or (HAND_OFF, why)."""
        if self.elector.is_leader():
            if self.may_decide():
                return Route.DECIDE, ""
            return Route.HAND_OFF, "this replica just took the lead and is catching up"
        url = self.elector.leader_url()
        if url and url != self.own_url:
            return Route.FORWARD, url
        if self.elector.holder():
            return Route.HAND_OFF, "the leading replica publishes no address"
        return Route.HAND_OFF, "no replica leads right now"

    # ---- the gate --------------------------------------------------------
    def _current(self, term: int) -> bool:
        with self._lock:
            return self._term == term

    def _establish(self, term: int) -> None:
        settings = self.settings
        wait_until = self._since + settings.webhook_timeout + settings.grace
        while self._current(term) and self.clock() < wait_until:
            self.sleep(min(0.05, max(0.0, wait_until - self.clock())))
        if not self._current(term):
            return
        barrier = ""
        try:
            barrier = self._current_rv()
        except Exception as err:  # no barrier: fall back to the bounded wait alone
            log.warning("could not read the current resourceVersion: %s", err)
        deadline = self.clock() + settings.barrier_wait
        while self._current(term) and self.clock() < deadline:
            if barrier and _not_older(self._pod_rv(), barrier):
                break
            self.sleep(0.01)
        with self._lock:
            if self._term != term:
                return
            self._fresh = True
            self.fresh_after = self.clock() - self._since
        log.info(
            "deciding as leader",
            extra={"waitedSeconds": round(self.fresh_after, 3), "barrier": barrier},
        )
        self.on_fresh()


def _not_older(seen: str, barrier: str) -> bool:
    """Whether resourceVersion `seen` is at least `barrier` (etcd revisions; opaque otherwise)."""
    try:
        return int(seen) >= int(barrier)
    except ValueError:
        return False
