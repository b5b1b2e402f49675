"""Synchronous point reads of the embedded SQLite database for the recall hot path.

Every recall checks the user's switches and change version, and a snapshot past its time-to-live
re-reads its weights. Through SQLAlchemy async + aiosqlite each of those reads cost ~2 ms of CPU
(a transaction, a worker-thread round trip, result processing: docs/benchmarks.md); one indexed
``sqlite3`` query on a read-only connection costs tens of microseconds and, in WAL mode, never waits
for a writer. PostgreSQL keeps the async path:
``open_quick_reader`` returns None for any other database.
"""

from __future__ import annotations

import json
import operator
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import JSON, Boolean, and_, bindparam, func, select
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.sql import Select

from engram.models.domain import Memory
from engram.models.enums import Status
from engram.storage.crypto import ContentCipher
from engram.storage.keyring import KeyRing
from engram.storage.metadata import MetadataStore
from engram.storage.repositories.memories import RecallBookkeeping
from engram.storage.repositories.rows import memory_from_row
from engram.storage.schema import UTCDateTime, memories, switches, user_keys, user_versions
from engram.storage.vector_copies import PLACED_COLUMNS, copies_statement, opened_copies


def _sqlite_text(statement: Select[Any]) -> str:
    """The statement as SQLite text with ``?`` placeholders, compiled once at import: the point of
    this module is to skip SQLAlchemy's per-statement work, not its table definitions."""
    return str(statement.compile(dialect=sqlite.dialect(paramstyle="qmark")))


VERSION_SQL = _sqlite_text(
    select(user_versions.c.version).where(user_versions.c.user_id == bindparam("user_id"))
)
SWITCHES_SQL = _sqlite_text(
    select(switches.c.app_id, switches.c.enabled).where(switches.c.user_id == bindparam("user_id"))
)
BOOKKEEPING_SQL = _sqlite_text(
    select(
        memories.c.memory_id,
        memories.c.weight,
        memories.c.weight_at,
        memories.c.recall_count,
        memories.c.last_recalled_at,
    ).where(and_(memories.c.user_id == bindparam("user_id"), memories.c.status == bindparam("status")))
)

COPIES_SQL = _sqlite_text(copies_statement())
KEY_SQL = _sqlite_text(select(user_keys.c.wrapped_key).where(user_keys.c.user_id == bindparam("user_id")))
# The statuses' placeholders are added per call.
COUNT_SQL = _sqlite_text(select(func.count()).where(memories.c.user_id == bindparam("user_id")))
# Whole memory rows of one user; the statuses' placeholders are added per call.
MEMORIES_SQL = _sqlite_text(select(memories).where(memories.c.user_id == bindparam("user_id")))
_MEMORY_COLUMNS = [c.name for c in memories.c]
# A whole memory row's placing columns, in ``placed_statement``'s order (less its last, the copy).
_PLACING = operator.itemgetter(*(_MEMORY_COLUMNS.index(name) for name in PLACED_COLUMNS[:-1]))
# What SQLAlchemy's column types do to a stored value, done here for the columns that need it.
_DATETIMES = {c.name for c in memories.c if isinstance(c.type, UTCDateTime)}
_JSONS = {c.name for c in memories.c if isinstance(c.type, JSON)}
_BOOLEANS = {c.name for c in memories.c if isinstance(c.type, Boolean)}


class QuickReader:
    """Read-only point queries on one SQLite file, from the event loop's thread."""

    def __init__(self, path: Path) -> None:
        # Opened lazily: the file may not exist before the shards have migrated it.
        self._path = path
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite3.connect(
                f"file:{self._path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
            )
        return self._conn

    def version(self, user_id: str) -> int:
        """The user's change version (0 before any change)."""
        return _version(self._connection(), user_id)

    def switches(self, user_id: str) -> dict[str, bool]:
        """The user's switch map ("" = the global switch); empty when nothing was switched."""
        rows = self._connection().execute(SWITCHES_SQL, (user_id,)).fetchall()
        return {str(app_id): bool(enabled) for app_id, enabled in rows}

    def recall_bookkeeping(self, user_id: str) -> dict[str, RecallBookkeeping]:
        """Weight and hit columns of the user's ACTIVE memories, as ``tx.memories.recall_bookkeeping``."""
        rows = self._connection().execute(BOOKKEEPING_SQL, (user_id, Status.ACTIVE.value)).fetchall()
        return {
            str(memory_id): RecallBookkeeping(
                float(weight), _utc(weight_at), int(recall_count), _utc(last) if last else None
            )
            for memory_id, weight, weight_at, recall_count, last in rows
        }

    def count_with_status(self, user_id: str, statuses: Sequence[Status]) -> int:
        """How many of the user's memories are in ``statuses`` (nothing read but the index)."""
        sql = f"{COUNT_SQL} AND memories.status IN ({', '.join('?' * len(statuses))})"
        row = self._connection().execute(sql, (user_id, *(s.value for s in statuses))).fetchone()
        return int(row[0]) if row else 0

    def placed_read(
        self, user_id: str, statuses: Sequence[Status], key: KeyRing | ContentCipher | None
    ) -> PlacedRead:
        """The user's memories in ``statuses`` as rows of ``vector_copies.placed_statement`` (sealed:
        ``opened_placed`` opens them) and as whole rows, read in one read transaction (``key`` as in
        ``snapshot_rows``): a cold recall's first read, which ``memories_of`` then opens candidates
        from without reading them again."""
        with self._one_read() as conn:
            version = _version(conn, user_id)
            wrapped = _wrapped_key(conn, user_id, key)
            sql = f"{MEMORIES_SQL} AND memories.status IN ({', '.join('?' * len(statuses))})"
            values = conn.execute(sql, (user_id, *(s.value for s in statuses))).fetchall()
            # Whole rows, then the copies (two range reads, not placed_statement's join): the
            # candidates are opened from these rows, with no second read (docs/benchmarks.md).
            sealed = dict(conn.execute(COPIES_SQL, (user_id,)).fetchall())
        placed = [(*_PLACING(v), sealed.get(v[0])) for v in values]
        return PlacedRead(version, placed, _cipher(user_id, key, wrapped), {v[0]: v for v in values})

    def snapshot_rows(
        self, user_id: str, statuses: Sequence[Status], key: KeyRing | ContentCipher | None
    ) -> tuple[int, list[Memory], dict[str, np.ndarray]]:
        """The user's version, memories in ``statuses`` and opened vector copies, read in one read
        transaction: what a snapshot load reads through ``tx.memories.with_status`` and
        ``vector_copies.for_user``, without SQLAlchemy's per-row work. ``key``: the user's cipher,
        or the keyring whose keys this database holds (then the key is read in that transaction
        too, and a shredded key opens nothing: P8)."""
        with self._one_read() as conn:
            version = _version(conn, user_id)
            wrapped = _wrapped_key(conn, user_id, key)
            sql = f"{MEMORIES_SQL} AND memories.status IN ({', '.join('?' * len(statuses))})"
            values = conn.execute(sql, (user_id, *(s.value for s in statuses))).fetchall()
            sealed = conn.execute(COPIES_SQL, (user_id,)).fetchall()
        cipher = _cipher(user_id, key, wrapped)
        rows = [_memory(v, cipher) for v in values]
        return version, rows, opened_copies(sealed, cipher)

    @contextmanager
    def _one_read(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one read transaction: one consistent view of the file."""
        conn = self._connection()
        conn.execute("BEGIN")  # deferred: in WAL mode no lock is taken and no writer waits
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def close(self) -> None:
        """Close the connection; safe to call twice."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


async def read_key(metadata: MetadataStore, user_id: str) -> KeyRing | ContentCipher | None:
    """What a quick read opens a user's rows with (its ``key``): the keyring when the keys live in
    this database (then read in the quick read's own transaction), else the user's cipher."""
    if not metadata.keyring.separate:
        return metadata.keyring
    async with metadata.transaction(readonly=True) as tx:
        # A read never makes a key (P8): without one, nothing opens and nothing is recalled.
        return await tx.keys.existing(user_id)


def _version(conn: sqlite3.Connection, user_id: str) -> int:
    row = conn.execute(VERSION_SQL, (user_id,)).fetchone()
    return int(row[0]) if row else 0


def _wrapped_key(conn: sqlite3.Connection, user_id: str, key: KeyRing | ContentCipher | None) -> bytes | None:
    """The user's wrapped data key when ``key`` is the keyring (its keys are in this database)."""
    if not isinstance(key, KeyRing):
        return None
    row = conn.execute(KEY_SQL, (user_id,)).fetchone()
    return bytes(row[0]) if row else None


def _cipher(user_id: str, key: KeyRing | ContentCipher | None, wrapped: bytes | None) -> ContentCipher | None:
    return key.existing_from(user_id, wrapped) if isinstance(key, KeyRing) else key


def _utc(stored: str) -> datetime:
    # storage.schema.UTCDateTime keeps naive UTC on SQLite, as "YYYY-MM-DD HH:MM:SS.ffffff"; parsed
    # with its offset appended, a fifth of the time of parsing it and then replacing the zone.
    try:
        return datetime.fromisoformat(stored + "+00:00")
    except ValueError:  # not the naive form (a value written some other way): as SQLAlchemy reads it
        return datetime.fromisoformat(stored).replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class PlacedRead:
    """A cold recall's first read (``QuickReader.placed_read``)."""

    version: int
    # As ``vector_copies.placed_statement`` gives them.
    placed: list[tuple[Any, ...]]
    cipher: ContentCipher | None
    # The same memories' whole rows by id, still sealed: ``memories_of`` opens the candidates'.
    rows: dict[str, tuple[Any, ...]]

    def memories_of(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """Those of these memories that were read, opened as ``tx.memories.get_many`` opens them,
        with no further read."""
        return {m: _memory(self.rows[m], self.cipher) for m in memory_ids if m in self.rows}


def _memory(values: Sequence[Any], cipher: ContentCipher | None) -> Memory:
    return memory_from_row(_typed(dict(zip(_MEMORY_COLUMNS, values, strict=True))), cipher)


def _typed(row: dict[str, Any]) -> dict[str, Any]:
    for name in _DATETIMES:
        if row[name] is not None:
            row[name] = _utc(row[name])
    for name in _JSONS:
        value = row[name]
        # Most labels are sealed (migration 0005): these columns hold "[]", and a snapshot load
        # reads two of them a row.
        row[name] = None if value is None else [] if value == "[]" else json.loads(value)
    for name in _BOOLEANS:
        row[name] = bool(row[name])
    return row


def open_quick_reader(database_url: str) -> QuickReader | None:
    """A quick reader for a SQLite file URL, None for other databases (and in-memory SQLite)."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return QuickReader(Path(url.database))
