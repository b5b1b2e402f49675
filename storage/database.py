"""Async engine creation for the metadata store: SQLite (default) or PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from engram.storage.private_files import private_dir, private_file

READONLY_OPTION = "engram_readonly"
"""Execution option marking a transaction that only reads (SQLite then begins it deferred)."""


def create_engine(url: str, *, busy_timeout_ms: int = 5000, echo: bool = False) -> AsyncEngine:
    """An async engine; SQLite gets WAL, secure delete and a busy timeout on every connection."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:":
            private_dir(Path(database).parent)
            # A file left by an older version may be 0644 (its WAL and SHM follow the umask).
            for suffix in ("", "-wal", "-shm"):
                private_file(Path(database + suffix))
        engine = create_async_engine(url, echo=echo, connect_args={"timeout": busy_timeout_ms / 1000})
        _configure_sqlite(engine, busy_timeout_ms)
        return engine
    return create_async_engine(url, echo=echo, pool_pre_ping=True, pool_size=10, max_overflow=10)


def _configure_sqlite(engine: AsyncEngine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # pysqlite opens a transaction only at the first write, so a read-then-write would not be
        # atomic (a lost update). Take transaction control back and BEGIN explicitly below.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        # WAL lets readers run beside the single writer; NORMAL sync is durable in WAL mode.
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        # Deleted rows (a shredded key, purged ciphertext) are overwritten with zeros, not left in
        # free pages (P8); the WAL's copies go at the checkpoint after a purge's sweep.
        cursor.execute("PRAGMA secure_delete=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        # A deferred transaction that reads, then writes after another connection committed, fails
        # at once with "database is locked" (the busy timeout does not apply): writers take the
        # write lock up front and wait their turn; readers stay deferred and never queue behind them.
        readonly = conn.get_execution_options().get(READONLY_OPTION, False)
        conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")


async def checkpoint_wal(engine: AsyncEngine) -> bool:
    """Copy the WAL into the database file and truncate it (SQLite; nothing elsewhere).

    After a purge's sweep the WAL still holds old page images (a deleted key, old ciphertext);
    TRUNCATE writes the current pages back and empties the file. False when a reader kept part of
    it (the next sweep's checkpoint finishes the job).
    """
    if not is_sqlite(engine):
        return True
    async with engine.connect() as conn:
        # On the bare driver connection: SQLAlchemy would open a transaction first, and a
        # checkpoint cannot run inside one.
        raw = await conn.get_raw_connection()
        driver: Any = raw.driver_connection
        cursor = await driver.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        row = await cursor.fetchone()
        await cursor.close()
    return row is not None and int(row[0]) == 0


def is_sqlite(engine: AsyncEngine) -> bool:
    """True when the engine talks to SQLite."""
    return engine.dialect.name == "sqlite"


async def ensure_postgres_database(url: str) -> bool:
    """Create the PostgreSQL database ``url`` names when it is missing; True when it was created.

    Connects to the server's ``postgres`` database to do it (development and CI: a cluster's
    database is made by its admin)."""
    target = make_url(url)
    if not target.drivername.startswith("postgresql") or not target.database:
        raise ValueError("ensure_postgres_database needs a postgresql URL naming a database")
    admin = create_async_engine(target.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            exists = await conn.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": target.database}
            )
            if exists.scalar() is not None:
                return False
            quoted = target.database.replace('"', '""')
            await conn.execute(text(f'CREATE DATABASE "{quoted}"'))
            return True
    finally:
        await admin.dispose()
