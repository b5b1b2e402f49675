"""RateLimiter: token buckets per user, refilled with time, bounded in memory, live settings."""

from __future__ import annotations

import pytest

from engram.models.settings import LimitSettings
from engram.serve.rate_limit import RateLimiter
from tests.conftest import ManualMonotonic

pytestmark = pytest.mark.unit


def test_a_burst_is_allowed_then_refused_then_refilled_at_the_rate() -> None:
    clock = ManualMonotonic()
    limiter = RateLimiter(LimitSettings(user_rate_per_s=2, user_burst=3), monotonic=clock)
    assert [limiter.allow("u1") for _ in range(4)] == [True, True, True, False]
    assert limiter.allow("u2"), "another user has a bucket of their own"
    clock.now += 0.5  # one token back at 2/s
    assert [limiter.allow("u1") for _ in range(2)] == [True, False]
    clock.now += 60  # never more than the burst
    assert [limiter.allow("u1") for _ in range(4)] == [True, True, True, False]


def test_zero_rate_turns_the_limit_off_and_changes_apply_at_once() -> None:
    limits = LimitSettings(user_rate_per_s=0, user_burst=1)
    limiter = RateLimiter(limits, monotonic=ManualMonotonic())
    assert all(limiter.allow("u1") for _ in range(1000))
    limits.user_rate_per_s = 1.0  # what a user_config change does, in place
    assert [limiter.allow("u1") for _ in range(2)] == [True, False]


def test_forgotten_users_are_bounded() -> None:
    settings = LimitSettings(user_rate_per_s=1, user_burst=1)
    limiter = RateLimiter(settings, max_keys=2, monotonic=ManualMonotonic())
    for user in ("a", "b", "c"):
        assert limiter.allow(user)
    assert not limiter.allow("c")
    assert limiter.allow("a"), "the oldest bucket was dropped and starts full"
