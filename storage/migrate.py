"""Bring a metadata database to the latest schema with the bundled Alembic migrations."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# Any constant both sides agree on: the key of PostgreSQL's advisory lock held while migrating.
_MIGRATION_LOCK = 0x656E6772616D  # "engram"


def alembic_config(url: str = "") -> Config:
    """An Alembic config pointing at the bundled migrations."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        config.set_main_option("sqlalchemy.url", url)
    return config


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Apply every migration up to ``revision`` on ``engine``'s database."""

    def _upgrade(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)

    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Shards of a new cluster start together against one empty database: one migrates, the
            # others wait here, then find the schema at head (PostgreSQL's DDL is transactional).
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
        await conn.run_sync(_upgrade)
