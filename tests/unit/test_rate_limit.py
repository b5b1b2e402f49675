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


def test_a_keys_flood_never_throttles_another_key_for_the_same_user() -> None:
    limiter = RateLimiter(
        LimitSettings(user_rate_per_s=1, user_burst=3, key_rate_per_s=100, key_burst=100),
        monotonic=ManualMonotonic(),
    )
    assert [limiter.allow("u", "ka", "shop") for _ in range(4)] == [True, True, True, False]
    assert limiter.allow("u", "kb", "clinic"), "another key (tenant) has buckets of its own"
    assert limiter.allow("u", "ka", "bank"), "the same key's other app has its own user bucket"
    assert limiter.allow("u"), "a caller without a key (auth off, a handle) counts per user"


def test_a_keys_total_is_shared_by_its_users_and_apps_only() -> None:
    limiter = RateLimiter(
        LimitSettings(user_rate_per_s=10, user_burst=10, key_rate_per_s=1, key_burst=4),
        monotonic=ManualMonotonic(),
    )
    assert [limiter.allow(f"u{i}", "ka", "shop") for i in range(5)] == [True] * 4 + [False]
    assert not limiter.allow(None, "ka"), "requests without a user (task polls) count too"
    assert limiter.allow("u0", "kb", "shop")


def test_a_refusal_takes_no_token_from_any_bucket() -> None:
    clock = ManualMonotonic()
    limiter = RateLimiter(
        LimitSettings(user_rate_per_s=1, user_burst=2, key_rate_per_s=1, key_burst=2), monotonic=clock
    )
    assert limiter.allow("u1", "ka") and limiter.allow("u1", "ka")
    assert not limiter.allow("u2", "ka")  # the key's total is spent; u2's own bucket is untouched
    clock.now += 1.0  # one key token back
    assert limiter.allow("u2", "ka")
    assert not limiter.allow("u1", "ka"), "u1 has one token back, the key has none left"


def test_a_zero_key_rate_leaves_only_the_user_limit() -> None:
    limiter = RateLimiter(
        LimitSettings(user_rate_per_s=1, user_burst=1, key_rate_per_s=0), monotonic=ManualMonotonic()
    )
    assert all(limiter.allow(f"u{i}", "ka") for i in range(50))
    assert not limiter.allow("u0", "ka")
