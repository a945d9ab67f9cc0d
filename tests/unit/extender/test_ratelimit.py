"""The token bucket every API client in the comparison shares the settings of."""

from __future__ import annotations

import pytest

from webhook.extender.ratelimit import TokenBucket


def test_a_burst_is_free_and_the_next_token_waits_one_refill_interval() -> None:
    bucket = TokenBucket(10, 3, clock=lambda: 0.0)

    waits = [bucket.reserve(0.0) for _ in range(4)]

    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3] == pytest.approx(0.1)


def test_tokens_refill_at_qps_up_to_the_burst() -> None:
    bucket = TokenBucket(10, 2, clock=lambda: 0.0)
    bucket.reserve(0.0)
    bucket.reserve(0.0)

    assert bucket.reserve(10.0) == 0.0
    assert bucket.reserve(10.0) == 0.0
    assert bucket.reserve(10.0) == pytest.approx(0.1)


def test_zero_qps_means_unlimited() -> None:
    bucket = TokenBucket(0, 0, clock=lambda: 0.0)

    assert all(bucket.reserve(0.0) == 0.0 for _ in range(1000))


def test_wait_sleeps_for_the_reserved_delay() -> None:
    slept: list[float] = []
    bucket = TokenBucket(2, 1, clock=lambda: 0.0, sleep=slept.append)

    bucket.wait()
    bucket.wait()

    assert slept == [pytest.approx(0.5)]


def test_a_limited_bucket_needs_a_burst_of_at_least_one() -> None:
    with pytest.raises(ValueError, match="burst"):
        TokenBucket(5, 0)
