"""The one retry loop: attempts, deadline, backoff, and which errors it retries."""

from __future__ import annotations

import pytest

from engram.models.rules.retry import retry
from tests.conftest import ManualMonotonic

pytestmark = pytest.mark.unit


class Flaky:
    """Raises ``error`` for the first ``failures`` calls, then answers ``"done"``."""

    def __init__(self, failures: int, error: type[BaseException] = ConnectionError) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error("not yet")
        return "done"


def _sleeper(clock: ManualMonotonic, pauses: list[float]):  # type: ignore[no-untyped-def]
    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        clock.now += seconds

    return sleep


async def test_retries_with_doubling_pauses_until_it_answers() -> None:
    clock, pauses, notes = ManualMonotonic(), [], []
    flaky = Flaky(failures=4)
    answer = await retry(
        flaky,
        retry_on=(ConnectionError,),
        attempts=10,
        first_delay_s=0.5,
        max_delay_s=3.0,
        on_retry=lambda attempt, exc, pause: notes.append((attempt, type(exc).__name__, pause)),
        sleep=_sleeper(clock, pauses),
        clock=clock,
    )
    assert answer == "done" and flaky.calls == 5
    assert pauses == [0.5, 1.0, 2.0, 3.0]
    assert notes == [
        (1, "ConnectionError", 0.5),
        (2, "ConnectionError", 1.0),
        (3, "ConnectionError", 2.0),
        (4, "ConnectionError", 3.0),
    ]


async def test_the_last_error_is_raised_when_attempts_run_out() -> None:
    clock, pauses = ManualMonotonic(), []
    flaky = Flaky(failures=100)
    with pytest.raises(ConnectionError):
        await retry(
            flaky, retry_on=(ConnectionError,), attempts=3, sleep=_sleeper(clock, pauses), clock=clock
        )
    assert flaky.calls == 3 and len(pauses) == 2


async def test_a_deadline_caps_the_last_pause_and_ends_the_retries() -> None:
    clock, pauses = ManualMonotonic(), []
    flaky = Flaky(failures=100)
    with pytest.raises(ConnectionError):
        await retry(
            flaky,
            retry_on=(ConnectionError,),
            deadline_s=4.0,
            first_delay_s=1.0,
            sleep=_sleeper(clock, pauses),
            clock=clock,
        )
    assert pauses == [1.0, 2.0, 1.0] and sum(pauses) == pytest.approx(4.0)


async def test_other_errors_pass_through_at_once_and_a_bound_is_required() -> None:
    clock, pauses = ManualMonotonic(), []
    flaky = Flaky(failures=1, error=ValueError)
    with pytest.raises(ValueError, match="not yet"):
        await retry(
            flaky, retry_on=(ConnectionError,), attempts=5, sleep=_sleeper(clock, pauses), clock=clock
        )
    assert flaky.calls == 1 and pauses == []
    with pytest.raises(ValueError, match="needs a bound"):
        await retry(flaky, retry_on=(ConnectionError,))
