"""A shard queues, by itself, an acknowledged task that none of its mailboxes holds (a lost node's
shard acknowledged it after its replacement had resumed), without waiting for the next start."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from engram.actors.task_runner import KIND_ADD
from engram.models.api import AddRequest
from engram.models.domain import WriteTask, utcnow
from engram.models.enums import TaskStatus
from engram.models.ids import new_id
from engram.models.settings import Settings
from engram.serve.shard import Shard

pytestmark = pytest.mark.integration

GUARD_S = 60  # only a guard against a hang


async def test_a_shard_queues_an_orphaned_task_within_its_rescan_interval(tmp_path: Path) -> None:
    settings = Settings(
        storage={"data_dir": tmp_path / "data"},
        serve={"extraction_replicas": 0, "task_rescan_s": 0.05},
    )
    shard = Shard(settings, 0)
    backend = await shard.backend()
    try:
        created = utcnow() - timedelta(seconds=60)
        request = AddRequest(user_id="u1", messages=[{"role": "user", "content": "I live in Porto."}])
        orphan = WriteTask(
            task_id=new_id(),
            user_id="u1",
            kind=KIND_ADD,
            status=TaskStatus.PENDING,
            payload=request.model_dump(mode="json"),
            created_at=created,
            updated_at=created,
        )
        # Written after this shard's resume, as a replaced incarnation of it would have.
        async with backend.service.metadata.transaction() as tx:
            await tx.tasks.insert(orphan)

        async def done() -> None:
            while True:
                if (await backend.write_path.task(orphan.task_id)).status is TaskStatus.DONE:
                    return
                await asyncio.sleep(0.05)  # polling the task's status, bounded by the guard

        await asyncio.wait_for(done(), GUARD_S)
    finally:
        await shard.close()
    assert shard._rescans is not None and shard._rescans.done(), "the rescans stop with the shard"


async def test_a_rescan_interval_of_0_starts_no_rescans(tmp_path: Path) -> None:
    shard = Shard(
        Settings(
            storage={"data_dir": tmp_path / "data"}, serve={"extraction_replicas": 0, "task_rescan_s": 0}
        ),
        0,
    )
    await shard.backend()
    await shard.close()
    assert shard._rescans is None
