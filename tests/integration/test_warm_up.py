"""A Recall replica's warm-up waits for the shards' migration (serve/warm_up.py): over a database one
release behind (migration 0010, before ``memories.context``), a warm-up that read first failed as a
whole and the replica started with no user warm. Real SQLite and milvus-lite, real migrations."""

from __future__ import annotations

import gc
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy.engine import Connection

from engram.actors.memory_service import MemoryService
from engram.models.settings import Settings
from engram.serve.heap import FULL_COLLECTION_EVERY
from engram.serve.memory_core import build_recaller
from engram.serve.warm_up import warm_up, warm_when_ready
from engram.storage.migrate import alembic_config, upgrade
from engram.storage.stores import open_stores
from tests.support.service import remember

pytestmark = pytest.mark.integration


async def _downgraded(settings: Settings) -> None:
    """Two users' memories, written at head, then the schema taken back to 0010."""
    stores = await open_stores(settings)
    try:
        service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder)
        await remember(service, "Plays the cello on Sundays", "u1")
        await remember(service, "Lives near the harbour", "u2")

        def downgrade(connection: Connection) -> None:
            config = alembic_config()
            config.attributes["connection"] = connection
            command.downgrade(config, "0010")

        async with stores.metadata.engine.begin() as conn:
            await conn.run_sync(downgrade)
    finally:
        await stores.close()


async def test_the_warm_up_waits_for_the_migration(tmp_path: Path) -> None:
    settings = Settings(storage={"data_dir": tmp_path / "data"}, recall={"timeout_ms": 30_000})
    await _downgraded(settings)
    stores = await open_stores(settings, migrate=False)
    recaller = build_recaller(settings, stores.vectors, stores.embedder)
    thresholds = gc.get_threshold()
    try:
        # What the replica did before: read first, on the schema of the release before.
        with pytest.raises(Exception, match="context"):
            await recaller.snapshots.warm(10)
        failed = await warm_up(_never_ready, recaller.snapshots, 10)
        assert (failed["done"], failed["users"]) == (1.0, 0.0)
        # Even a failed warm-up leaves the replica's heap frozen and its full collections spaced.
        assert gc.get_threshold()[2] == FULL_COLLECTION_EVERY
        warmed = await warm_when_ready(lambda: upgrade(stores.metadata.engine), recaller.snapshots, 10)
        assert warmed == 2
    finally:
        gc.set_threshold(*thresholds)
        await recaller.close()
        await stores.close()
    with closing(sqlite3.connect(settings.storage.data_dir / "engram.db")) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchone() == ("0011",)


async def _never_ready() -> None:
    raise RuntimeError("the shards did not start")
