"""Async engine creation for the metadata store: SQLite (default) or PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

READONLY_OPTION = "engram_readonly"
"""Execution option marking a transaction that only reads (SQLite then begins it deferred)."""


def create_engine(url: str, *, busy_timeout_ms: int = 5000, echo: bool = False) -> AsyncEngine:
    """An async engine; SQLite gets WAL, a busy timeout and foreign keys on every connection."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
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
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        # A deferred transaction that reads, then writes after another connection committed, fails
        # at once with "database is locked" (the busy timeout does not apply): writers take the
        # write lock up front and wait their turn; readers stay deferred and never queue behind them.
        readonly = conn.get_execution_options().get(READONLY_OPTION, False)
        conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")


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
