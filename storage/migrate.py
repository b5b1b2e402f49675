"""Bring a metadata database to the latest schema with the bundled Alembic migrations."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


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
        await conn.run_sync(_upgrade)
