"""Alembic environment: runs on a connection handed over by ``storage.migrate``, or on the URL."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from engram.storage.database import create_engine
from engram.storage.schema import metadata

config = context.config


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_on_url(url: str) -> None:
    engine = create_engine(url)
    async with engine.begin() as conn:
        await conn.run_sync(_run)
    await engine.dispose()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    asyncio.run(_run_on_url(config.get_main_option("sqlalchemy.url") or ""))
