"""The daily schedule of the sweep job: at a configured off-peak time (UTC), once a day.

Plain asyncio with an injected clock and sleep, so tests drive days of schedule without waiting.
The time of day is read before every wait, so a run-time settings change (O1) takes effect on the
next day's run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, time, timedelta

log = logging.getLogger(__name__)


def parse_time_of_day(text: str) -> time:
    """``"HH:MM"`` as a UTC time of day."""
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes), tzinfo=UTC)


def next_run_at(now: datetime, time_of_day: str) -> datetime:
    """The first moment strictly after ``now`` at ``time_of_day`` (UTC)."""
    at = parse_time_of_day(time_of_day)
    today = datetime.combine(now.astimezone(UTC).date(), at)
    return today if today > now else today + timedelta(days=1)


class DailyScheduler:
    """Calls ``run(scheduled_time)`` every day at ``time_of_day()``; a failed run waits for the next day."""

    def __init__(
        self,
        run: Callable[[datetime], Awaitable[object]],
        time_of_day: Callable[[], str],
        *,
        enabled: Callable[[], bool] = lambda: True,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self._run = run
        self._time_of_day = time_of_day
        self._enabled = enabled
        self._clock = clock
        self._sleep = sleep
        self.runs = 0
        self.failures = 0

    async def serve(self, max_runs: int | None = None) -> None:
        """Loop forever (or until ``max_runs`` runs were attempted)."""
        attempted = 0
        while max_runs is None or attempted < max_runs:
            target = next_run_at(self._clock(), self._time_of_day())
            # Sleep in steps: a clock jump or a changed time of day is noticed within an hour.
            while (wait := (target - self._clock()).total_seconds()) > 0:
                await self._sleep(min(wait, 3600.0))
            if not self._enabled():
                continue
            attempted += 1
            try:
                await self._run(target)
                self.runs += 1
            except Exception as exc:  # the scheduler must outlive one failed run
                self.failures += 1
                log.warning("scheduled lifecycle sweep failed: %s", type(exc).__name__)
