"""The daily schedule (L2) driven by a hand-moved clock: no sleeping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engram.lifecycle.schedule import DailyScheduler, next_run_at

pytestmark = pytest.mark.unit


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC)


def test_next_run_is_the_next_occurrence_of_the_time_of_day() -> None:
    assert next_run_at(at(1, 2, 59), "03:00") == at(1, 3)
    assert next_run_at(at(1, 3), "03:00") == at(2, 3)
    assert next_run_at(at(1, 23), "03:00") == at(2, 3)
    assert next_run_at(at(1, 3, 30), "22:15") == at(1, 22, 15)


class FakeTime:
    """A clock whose sleep moves it forward."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += timedelta(seconds=seconds)


async def test_runs_daily_at_the_configured_off_peak_time() -> None:
    fake = FakeTime(at(1, 12))
    runs: list[datetime] = []
    time_of_day = ["03:00"]

    async def run(scheduled: datetime) -> None:
        runs.append(scheduled)
        if len(runs) == 2:
            time_of_day[0] = "04:30"  # a run-time settings change reaches the next wait
            raise RuntimeError("one failed run")

    scheduler = DailyScheduler(run, lambda: time_of_day[0], clock=fake, sleep=fake.sleep)
    await scheduler.serve(max_runs=3)
    assert runs == [at(2, 3), at(3, 3), at(3, 4, 30)]
    assert (scheduler.runs, scheduler.failures) == (2, 1)
    assert max(fake.sleeps) <= 3600


async def test_a_disabled_scheduler_skips_its_runs() -> None:
    fake = FakeTime(at(1, 12))
    enabled = [False]
    runs: list[datetime] = []

    async def run(scheduled: datetime) -> None:
        runs.append(scheduled)

    async def sleep(seconds: float) -> None:
        await fake.sleep(seconds)
        if fake.now >= at(4, 0):
            enabled[0] = True

    scheduler = DailyScheduler(run, lambda: "03:00", enabled=lambda: enabled[0], clock=fake, sleep=sleep)
    await scheduler.serve(max_runs=1)
    assert runs == [at(4, 3)]
