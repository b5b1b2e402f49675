"""The in-app scheduler of the lifecycle job: one named Ray actor per app runs it daily (L2).

The Ingress starts it (``get_if_exists``: however many Ingress replicas, one scheduler); it sleeps
until ``lifecycle.sweep_time_utc`` and runs ``lifecycle.job.run_job`` (shards ensured by
``serve.sweep_job``) in a worker thread, since the job driver blocks on Ray calls.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

import ray

from engram.lifecycle.job import run_job
from engram.lifecycle.schedule import DailyScheduler
from engram.models.settings import Settings
from engram.serve.settings_update import apply_overrides
from engram.serve.sweep_job import ensure_shards

log = logging.getLogger(__name__)


def scheduler_name(app_name: str) -> str:
    """The Ray actor name of the app's scheduler (namespaced like the shards)."""
    return f"{app_name}:sweep-scheduler"


@ray.remote(num_cpus=0, max_restarts=-1)
class SweepSchedulerActor:
    """Holds the DailyScheduler task of one app."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._task: asyncio.Task[None] | None = None
        self._scheduler = DailyScheduler(
            self._run,
            lambda: self.settings.lifecycle.sweep_time_utc,
            enabled=lambda: self.settings.lifecycle.scheduler_enabled,
        )

    async def start(self) -> bool:
        """Start the daily loop (idempotent); True when it is running."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._scheduler.serve())
        return not self._task.done()

    async def _run(self, scheduled: datetime) -> None:
        report = await asyncio.to_thread(run_job, self.settings, now=scheduled, prepare=ensure_shards)
        log.info("scheduled lifecycle sweep done: %s", report.totals)

    def stats(self) -> dict[str, int]:
        """Runs and failures so far."""
        return {"runs": self._scheduler.runs, "failures": self._scheduler.failures}

    def reconfigure(self, overrides: dict[str, Any]) -> None:
        """Run-time settings (O1): the next wait reads the new time of day."""
        apply_overrides(self.settings, overrides)


def start_scheduler(settings: Settings) -> Any:
    """The app's scheduler actor, created on first use and started; returns its handle."""
    actor = SweepSchedulerActor.options(  # type: ignore[attr-defined]
        name=scheduler_name(settings.serve.app_name), get_if_exists=True, lifetime="detached"
    ).remote(settings)
    actor.start.remote()
    return actor
