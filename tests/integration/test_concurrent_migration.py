"""Several processes migrating one new PostgreSQL database at once (the shards of a new cluster)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from engram.storage.migrate import upgrade

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_shards_migrating_one_empty_database_together_all_succeed(database_url: str) -> None:
    # Found by the distributed profile: 4 shards starting together raced on CREATE TABLE
    # alembic_version and 3 of them failed to start.
    engines = [create_async_engine(database_url) for _ in range(4)]
    try:
        # Without the lock they fail, or wait on each other's catalog rows: bounded either way.
        results = await asyncio.wait_for(
            asyncio.gather(*(upgrade(e) for e in engines), return_exceptions=True), timeout=120
        )
        assert [r for r in results if isinstance(r, BaseException)] == []
        async with engines[0].connect() as conn:
            versions = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalars().all()
        assert len(versions) == 1
    finally:
        for engine in engines:
            await engine.dispose()
