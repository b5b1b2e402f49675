"""Who may read a write task, kept beside it (migration 0008, SPEC P9): written with each task,
filled for older tasks from their payload when the stores open, and read without decrypting."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from engram.models.domain import WriteTask
from engram.models.enums import TaskStatus
from engram.models.rules.task_reach import REACH_ADMIN, REACH_APP, REACH_GLOBAL, TaskOwner
from engram.storage.database import create_engine
from engram.storage.migrate import upgrade
from engram.storage.schema import metadata, write_tasks
from engram.storage.stores import Stores
from engram.storage.task_backfill import backfill_task_reach

pytestmark = pytest.mark.integration

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def task(task_id: str, user_id: str, kind: str, payload: dict[str, object]) -> WriteTask:
    return WriteTask(task_id, user_id, kind, TaskStatus.PENDING, payload, NOW, NOW)


TASKS = {
    "a" * 32: (task("a" * 32, "bob", "add", {"app_id": "clinic", "messages": []}), ("clinic", REACH_APP)),
    "b" * 32: (task("b" * 32, "bob", "add", {"messages": []}), ("", REACH_GLOBAL)),
    "c" * 32: (task("c" * 32, "bob", "export", {"user_id": "bob"}), ("", REACH_ADMIN)),
    "d" * 32: (
        task("d" * 32, "carol", "add_structured", {"app_id": "shop", "level": "GLOBAL"}),
        ("shop", REACH_GLOBAL),
    ),
}


async def test_each_task_keeps_its_reach_and_old_tasks_get_theirs_from_the_payload(stores: Stores) -> None:
    async with stores.metadata.transaction() as tx:
        await tx.tasks.insert_many([t for t, _ in TASKS.values()])
    async with stores.metadata.transaction(readonly=True) as tx:
        for task_id, (written, (app_id, reach)) in TASKS.items():
            assert await tx.tasks.owner(task_id) == TaskOwner(written.user_id, written.kind, app_id, reach)
        assert await tx.tasks.owner("e" * 32) is None
    # As before migration 0008: nothing beside the task; carol's key is shredded meanwhile.
    async with stores.metadata.engine.begin() as conn:
        await conn.execute(update(write_tasks).values(app_id=None, reach=None))
    async with stores.metadata.transaction() as tx:
        assert await tx.keys.shred("carol")
    async with stores.metadata.transaction(readonly=True) as tx:
        # Not filled yet: an admin key only, never a guess.
        assert (await tx.tasks.owner("a" * 32)) == TaskOwner("bob", "add", "", REACH_ADMIN)
    assert await backfill_task_reach(stores.metadata, batch=3) == 4
    assert await backfill_task_reach(stores.metadata) == 0
    async with stores.metadata.transaction(readonly=True) as tx:
        for task_id, (written, (app_id, reach)) in TASKS.items():
            if written.user_id == "carol":
                app_id, reach = "", REACH_ADMIN  # its payload cannot be read any more
            assert await tx.tasks.owner(task_id) == TaskOwner(written.user_id, written.kind, app_id, reach)


async def test_migration_0008_fills_admin_tasks_and_matches_the_schema(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    try:
        await upgrade(engine, "0007")
        async with engine.begin() as conn:
            for task_id, kind in (("a" * 32, "add"), ("c" * 32, "export")):
                # Only the columns of revision 0007.
                row = {"task_id": task_id, "user_id": "bob", "kind": kind, "status": "DONE", "payload": b""}
                await conn.execute(
                    insert(write_tasks).values(**row, attempts=1, created_at=NOW, updated_at=NOW)
                )
        await upgrade(engine)
        async with engine.connect() as conn:
            found = (await conn.execute(select(write_tasks.c.task_id, write_tasks.c.reach))).all()
            rows = {str(row[0]): row[1] for row in found}
            assert rows == {"a" * 32: None, "c" * 32: REACH_ADMIN}

            def diff(sync: Connection) -> list[object]:
                return list(compare_metadata(MigrationContext.configure(sync), metadata))

            assert await conn.run_sync(diff) == []
    finally:
        await engine.dispose()
