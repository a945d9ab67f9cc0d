"""A token bucket with client-go's semantics (qps refill, burst capacity).

Comparisons between components are only fair when every API client is
limited the same way; kube-scheduler takes clientConnection.qps/burst, the
extender's binder and the experiment's pod creator take this bucket.
`reserve` is pure bookkeeping with the time passed in; `wait` sleeps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    """`qps` tokens per second, at most `burst` saved; qps <= 0 means unlimited."""

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if qps > 0 and burst < 1:
            raise ValueError("burst must be at least 1 when qps is limited")
        self.qps, self.burst = qps, burst
        self._clock, self._sleep = clock, sleep
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def reserve(self, now: float) -> float:
        """Take one token at `now`; return how long the caller must wait before using it."""
        if self.qps <= 0:
            return 0.0
        with self._lock:
            elapsed = max(0.0, now - self._last)
            self._last = now
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def wait(self) -> float:
        """Block until a token is available; return the time waited."""
        delay = self.reserve(self._clock())
        if delay > 0:
            self._sleep(delay)
        return delay
