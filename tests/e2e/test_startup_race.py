"""A shard starts before Serve has registered the Extraction deployment (issue #19).

Serve registers an application's deployments in no fixed order. These tests make the worst order
certain instead of one start in ten: the shard starts, with tasks pending in its store, while the
app it names has no Extraction deployment at all. Before the fix its ``ready()`` raised
``KeyError: Deployment(name='Extraction', app=...) does not exist`` and failed the Ingress.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from engram.loadtest.restarts import seed_pending_tasks
from engram.models.api import TaskRequest
from engram.models.enums import TaskStatus
from engram.models.settings import Settings
from engram.storage.database import create_engine
from engram.storage.keyring import keyring_for
from engram.storage.metadata import MetadataStore
from tests.e2e.conftest import RunningApp

pytestmark = pytest.mark.e2e


def _settings(data_dir: Path, app_name: str, **serve: Any) -> Settings:
    return Settings(
        storage={"data_dir": data_dir},
        serve={"app_name": app_name, "deployment_wait_s": 600, **serve},
        limits={"user_rate_per_s": 0},
    )


def _start_shard(settings: Settings) -> Any:
    import ray

    from engram.models.rules.sharding import shard_name
    from engram.serve.shard import ShardActor

    shard = ShardActor.options(  # type: ignore[attr-defined]
        name=shard_name(settings.serve.app_name, 0), num_cpus=0
    ).remote(settings, 0)
    try:
        # Before the fix this raised the KeyError: the start asked Serve for the missing deployment.
        # The bound only catches a start that never ends: beside two busy loops one took over 120 s.
        assert ray.get(shard.ready.remote(), timeout=600) == 0
    except BaseException:
        ray.kill(shard)  # a failed start must not leave the actor retrying for the rest of the run
        raise
    return shard


def _status(shard: Any, task_id: str) -> TaskStatus:
    import ray

    view = ray.get(shard.task.remote(TaskRequest(task_id=task_id)), timeout=60)
    status: TaskStatus = view.status
    return status


def _wait_for_status(shard: Any, task_ids: list[str], wanted: set[TaskStatus], limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if all(_status(shard, t) in wanted for t in task_ids):
            return
        time.sleep(0.2)  # polling task state, bounded by the deadline
    seen = {t: _status(shard, t) for t in task_ids}
    raise AssertionError(f"tasks never reached {wanted}: {seen}")


def test_a_shard_started_before_extraction_exists_waits_for_it(
    engram_app: RunningApp, tmp_path: Path
) -> None:
    import ray
    from ray import serve

    from engram.serve.extraction import ExtractionDeployment

    settings = _settings(tmp_path / "data", "engram-race")
    task_ids = asyncio.run(seed_pending_tasks(settings, ["race-user"], 3))
    shard = _start_shard(settings)
    try:
        # Resumed at start: they wait for extraction, unfinished, instead of failing.
        _wait_for_status(shard, task_ids, {TaskStatus.PENDING, TaskStatus.RUNNING}, 120)
        assert all(_status(shard, t) is not TaskStatus.FAILED for t in task_ids)
        # The deployment appears late, as Serve may register it; the waiting tasks then finish.
        serve.run(
            ExtractionDeployment.options(ray_actor_options={"num_cpus": 0}).bind(settings),  # type: ignore[attr-defined]
            name=settings.serve.app_name,
            route_prefix=None,
        )
        _wait_for_status(shard, task_ids, {TaskStatus.DONE}, 600)
        # One after another on the user's mailbox: the first locker number is added, each later
        # one supersedes the one before (a changed value, #13).
        ops = [
            [d.op for d in ray.get(shard.task.remote(TaskRequest(task_id=t)), timeout=60).decisions]
            for t in task_ids
        ]
        assert sorted(ops) == [["ADD"], ["SUPERSEDE"], ["SUPERSEDE"]]
        ray.get(shard.close.remote(), timeout=120)
    finally:
        ray.kill(shard)
        serve.delete(settings.serve.app_name)


def test_a_shard_stops_cleanly_while_its_tasks_still_wait_for_extraction(
    engram_app: RunningApp, tmp_path: Path
) -> None:
    import ray

    settings = _settings(tmp_path / "data", "engram-never", stop_grace_s=1)
    task_ids = asyncio.run(seed_pending_tasks(settings, ["stop-user"], 2))
    shard = _start_shard(settings)
    try:
        # The stop lands mid-work: one task is running (waiting on extraction), the other queued.
        deadline = time.monotonic() + 120
        while TaskStatus.RUNNING not in {_status(shard, t) for t in task_ids}:
            assert time.monotonic() < deadline, "no task ever started"
            time.sleep(0.2)  # polling task state, bounded by the deadline
        ray.get(shard.close.remote(), timeout=120)  # the grace runs out; close still succeeds
    finally:
        ray.kill(shard)

    async def unfinished() -> set[str]:
        storage = settings.storage
        metadata = MetadataStore(create_engine(storage.resolved_database_url()), keyring_for(storage))
        try:
            async with metadata.transaction(readonly=True) as tx:
                return {t.task_id for t in await tx.tasks.unfinished()}
        finally:
            await metadata.close()

    # Nothing failed and nothing was lost: every task is left for the next start's resume.
    assert asyncio.run(unfinished()) == set(task_ids)
