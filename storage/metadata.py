"""The metadata store: memories, change log, counters, versions, tasks and keys on SQLAlchemy 2 async.

All work happens inside a ``MetadataTx`` so that a memory row, its counters and its change-log
entry commit together (DESIGN decision 3). The transaction holds one repository per aggregate
(``storage/repositories/``); content is sealed and opened there, on the way in and out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncTransaction

from engram.storage.database import READONLY_OPTION, is_sqlite
from engram.storage.keyring import KeyRing
from engram.storage.repositories.changes import ChangeLogRepository
from engram.storage.repositories.counters import CounterRepository, VersionRepository
from engram.storage.repositories.keys import UserKeys
from engram.storage.repositories.memories import MemoryRepository
from engram.storage.repositories.tasks import TaskRepository
from engram.storage.write_gate import WriteGate


class MetadataStore:
    """Opens transactions over the metadata database."""

    def __init__(self, engine: AsyncEngine, keyring: KeyRing, *, write_wait_s: float | None = None) -> None:
        """``write_wait_s``: the longest a SQLite writer of this process queues for its turn."""
        self.engine = engine
        self.keyring = keyring
        self._reader = engine.execution_options(**{READONLY_OPTION: True})
        # SQLite's writers queue in-process (storage.write_gate); a server database needs no gate.
        self.write_gate = WriteGate(write_wait_s) if is_sqlite(engine) else None

    @asynccontextmanager
    async def transaction(self, *, readonly: bool = False, urgent: bool = False) -> AsyncIterator[MetadataTx]:
        """One database transaction; commits on normal exit, rolls back on an exception.

        ``readonly`` transactions must not write (on SQLite they do not take the write lock).
        ``urgent``: an acknowledgement waits for this write; on SQLite it goes ahead of the others.
        """
        if readonly or self.write_gate is None:
            async with (self._reader if readonly else self.engine).begin() as conn:
                yield MetadataTx(conn, self.keyring)
            return
        async with self.write_gate.held(urgent=urgent), self.engine.begin() as conn:
            yield MetadataTx(conn, self.keyring)

    async def close(self) -> None:
        """Release every pooled connection (the key store's too)."""
        await self.engine.dispose()
        await self.keyring.close()


class MetadataTx:
    """One transaction: its connection and a repository per aggregate over it."""

    def __init__(self, conn: AsyncConnection, keyring: KeyRing) -> None:
        self.conn = conn
        self.keys = UserKeys(conn, keyring)
        self.memories = MemoryRepository(conn, self.keys)
        self.changes = ChangeLogRepository(conn, self.keys)
        self.counters = CounterRepository(conn)
        self.versions = VersionRepository(conn)
        self.tasks = TaskRepository(conn, self.keys)

    def savepoint(self) -> AsyncTransaction:
        """A nested transaction (SAVEPOINT): an exception inside undoes only what it wrapped."""
        return self.conn.begin_nested()
