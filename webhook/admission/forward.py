"""A follower hands an admission review to the leading replica, within a deadline.

Only the Lease holder decides (webhook.reconciler.authority). A follower
POSTs the API server's review body unchanged to the leader's `/mutate` over
TLS, authenticating with the replicas' own serving certificate (valid for
client auth) and verifying the leader's against the peer CA and name. The
budget goes along as the API server's own `?timeout=` would, so the leader
gives up when the follower will, and reserves for no longer than the API
server waits (`X-Placement-Webhook-Caller-Timeout`).

The answer is relayed as is. When the leader does not answer in time (or
answers anything but a review), the follower answers itself with a hand-off:
the pod is admitted unplaced and the fallback binder, on the leader, places
it. A slow leader costs a pod its admission-time placement, never its place.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

import urllib3

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-Placement-Webhook-Forwarded-By"
CALLER_TIMEOUT_HEADER = "X-Placement-Webhook-Caller-Timeout"


@dataclass(frozen=True)
class PeerSettings:
    """How replicas reach and trust each other."""

    identity: str
    """This replica's name, sent along for the leader's logs."""
    certfile: str
    """Client certificate (the replicas' serving certificate, valid for client auth)."""
    keyfile: str
    ca_file: str | None
    """CA that signed the replicas' serving certificates; None: the system's."""
    peer_name: str | None = None
    """Name the leader's certificate must carry (default: the host of its URL)."""
    max_budget: float = 1.0
    """Longest a follower waits for the leader, whatever the caller's timeout."""


@dataclass(frozen=True)
class Forwarded:
    status: int
    body: bytes
    seconds: float


class Forwarder:
    """Keeps one connection pool per leader URL (a new leader gets a new pool)."""

    def __init__(self, settings: PeerSettings, *, maxsize: int = 8):
        self.settings = settings
        self._maxsize = maxsize
        self._lock = threading.Lock()
        self._pools: dict[str, urllib3.HTTPSConnectionPool] = {}

    def _pool(self, url: str) -> urllib3.HTTPSConnectionPool:
        with self._lock:
            pool = self._pools.get(url)
            if pool is None:
                for old in self._pools.values():
                    old.close()
                self._pools.clear()
                parts = urlsplit(url)
                pool = urllib3.HTTPSConnectionPool(
                    parts.hostname or "",
                    parts.port or 443,
                    maxsize=self._maxsize,
                    block=False,
                    retries=False,
                    cert_file=self.settings.certfile,
                    key_file=self.settings.keyfile,
                    ca_certs=self.settings.ca_file,
                    cert_reqs="CERT_REQUIRED",
                    assert_hostname=self.settings.peer_name or parts.hostname,
                )
                self._pools[url] = pool
            return pool

    def forward(
        self, url: str, body: bytes, *, budget: float, caller_timeout: float
    ) -> Forwarded | None:
        """The leader's answer, or None when it gave none in `budget` seconds."""
        import time

        budget = min(budget, self.settings.max_budget)
        if budget <= 0.01:
            return None
        started = time.perf_counter()
        path = urlsplit(url).path.rstrip("/") + f"/mutate?timeout={int(budget * 1000)}ms"
        try:
            answer = self._pool(url).urlopen(
                "POST",
                path,
                body=body,
                headers={
                    "Content-Type": "application/json",
                    FORWARDED_HEADER: self.settings.identity,
                    CALLER_TIMEOUT_HEADER: f"{caller_timeout:.3f}",
                },
                timeout=urllib3.Timeout(connect=budget, read=budget),
                preload_content=True,
                release_conn=True,
            )
        except Exception as err:  # any transport failure: the caller hands the pod off
            log.info("leader at %s did not answer: %s", url, err)
            return None
        return Forwarded(answer.status, answer.data, time.perf_counter() - started)

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()
