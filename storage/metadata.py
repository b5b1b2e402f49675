"""The metadata store: memories, change log, counters and versions on SQLAlchemy 2 async.

All work happens inside a ``MetadataTx`` so that a memory row, its counters and its change-log
entry commit together (DESIGN decision 3). Content is encrypted here, on the way in and out.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, bindparam, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncTransaction
from sqlalchemy.sql.elements import ColumnElement

from engram.models.domain import ChangeLogEntry, Memory, WriteTask
from engram.models.enums import Level, MemType, OpSource, OpType, Ownership, Status, TaskStatus
from engram.models.rules.task_reach import REACH_ADMIN, TaskOwner, task_reach
from engram.storage.crypto import ContentCipher
from engram.storage.database import READONLY_OPTION, is_sqlite
from engram.storage.keyring import KeyRing
from engram.storage.schema import capacity_counters, change_log, memories, user_versions, write_tasks
from engram.storage.write_gate import WriteGate

_UNFINISHED = (TaskStatus.PENDING.value, TaskStatus.RUNNING.value)


@dataclass(frozen=True, slots=True)
class EvictionRow:
    """What capacity eviction needs to know of an active memory (no content)."""

    memory_id: str
    user_id: str
    app_id: str
    weight: float
    weight_at: datetime
    is_important: bool
    last_recalled_at: datetime | None
    custom_tags: list[str]


def keyset_after(
    created: ColumnElement[Any], key: ColumnElement[Any], after: tuple[datetime, str]
) -> ColumnElement[bool]:
    """Rows after ``after`` (created_at, id) in (created_at, id) order: one page boundary."""
    created_at, last_key = after
    return or_(created > created_at, and_(created == created_at, key > last_key))


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


@dataclass(frozen=True, slots=True)
class RecallBookkeeping:
    """What recall hits change on a memory (R4): its weight and when, and its hit count."""

    weight: float
    weight_at: datetime
    recall_count: int
    last_recalled_at: datetime | None


@dataclass(frozen=True)
class TaskOutcome:
    """How one task ends (``MetadataTx.finish_tasks``)."""

    task_id: str
    user_id: str
    status: TaskStatus
    decisions: list[dict[str, Any]] | None
    error: str | None


class MetadataTx:
    """Reads and writes of one transaction."""

    def __init__(self, conn: AsyncConnection, keyring: KeyRing) -> None:
        self.conn = conn
        self._keyring = keyring
        # The keyring checks its cache against the stored key once per user and transaction.
        self._ciphers: dict[str, ContentCipher] = {}

    def savepoint(self) -> AsyncTransaction:
        """A nested transaction (SAVEPOINT): an exception inside undoes only what it wrapped."""
        return self.conn.begin_nested()

    async def cipher(self, user_id: str) -> ContentCipher:
        """The user's content cipher (creates their data key on first use)."""
        cipher = self._ciphers.get(user_id)
        if cipher is None:
            cipher = await self._keyring.cipher_for(self.conn, user_id)
            self._ciphers[user_id] = cipher
        return cipher

    async def prefetch_ciphers(self, user_ids: Iterable[str]) -> None:
        """Have the ciphers of these users ready for the transaction (their keys read at once)."""
        missing = {u for u in user_ids if u not in self._ciphers}
        if missing:
            self._ciphers.update(await self._keyring.ciphers_for(self.conn, missing))

    async def prefetch_existing_ciphers(self, user_ids: Iterable[str]) -> None:
        """``prefetch_ciphers`` for reads: the keys of these users read at once, none created."""
        missing = {u for u in user_ids if u not in self._ciphers}
        if missing:
            self._ciphers.update(await self._keyring.existing_ciphers(self.conn, missing))

    async def existing_cipher(self, user_id: str) -> ContentCipher | None:
        """The user's content cipher if they have a data key; never creates one (sweeps of purged users)."""
        cipher = self._ciphers.get(user_id)
        if cipher is None:
            cipher = await self._keyring.existing_cipher(self.conn, user_id)
            if cipher is not None:
                self._ciphers[user_id] = cipher
        return cipher

    async def shred(self, user_id: str) -> bool:
        """Destroy the user's data key: all their stored content becomes unreadable."""
        self._ciphers.pop(user_id, None)
        return await self._keyring.shred(self.conn, user_id)

    # --- memories -----------------------------------------------------------------------------

    async def insert_memory(self, memory: Memory) -> None:
        """Insert a new memory row."""
        await self.conn.execute(memories.insert().values(**await self._to_row(memory)))

    async def insert_memories(self, rows: Sequence[Memory]) -> None:
        """Insert several new memory rows in one statement."""
        if rows:
            await self.conn.execute(memories.insert(), [await self._to_row(m) for m in rows])

    async def save_memory(self, memory: Memory) -> None:
        """Overwrite every column of an existing memory row."""
        row = await self._to_row(memory)
        await self.conn.execute(
            update(memories)
            .where(and_(memories.c.memory_id == memory.memory_id, memories.c.user_id == memory.user_id))
            .values(**row)
        )

    async def get_memory(self, user_id: str, memory_id: str) -> Memory | None:
        """One of the user's memories by id, or None (another user's id is never found)."""
        found = await self.get_memories(user_id, [memory_id])
        return found.get(memory_id)

    async def get_memories(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """The user's memories among ``memory_ids``, keyed by id."""
        if not memory_ids:
            return {}
        query = select(memories).where(
            and_(memories.c.user_id == user_id, memories.c.memory_id.in_(list(memory_ids)))
        )
        return {m.memory_id: m for m in await self._load(user_id, query)}

    async def memories_with_status(self, user_id: str, statuses: Sequence[Status]) -> list[Memory]:
        """All of the user's memories in the given states (at most capacity plus history)."""
        query = select(memories).where(
            and_(memories.c.user_id == user_id, memories.c.status.in_([s.value for s in statuses]))
        )
        return await self._load(user_id, query)

    async def find_by_hashes(self, user_id: str, content_hashes: Sequence[str]) -> dict[str, list[Memory]]:
        """The user's active memories with any of these content hashes, by hash (one query)."""
        if not content_hashes:
            return {}
        query = select(memories).where(
            and_(
                memories.c.user_id == user_id,
                memories.c.content_hash.in_(sorted(set(content_hashes))),
                memories.c.status == Status.ACTIVE.value,
            )
        )
        found: dict[str, list[Memory]] = {}
        for memory in await self._load(user_id, query):
            found.setdefault(memory.content_hash, []).append(memory)
        return found

    async def eviction_rows(self, user_id: str, app_id: str | None) -> list[EvictionRow]:
        """Active memories of one dimension (``app_id`` "" = global, None = all) for eviction."""
        conditions = [memories.c.user_id == user_id, memories.c.status == Status.ACTIVE.value]
        if app_id is not None:
            conditions.append(memories.c.app_id == app_id)
        query = select(
            memories.c.memory_id,
            memories.c.app_id,
            memories.c.weight,
            memories.c.weight_at,
            memories.c.is_important,
            memories.c.last_recalled_at,
            memories.c.custom_tags,
            memories.c.entities,
            memories.c.labels,
        ).where(and_(*conditions))
        rows = (await self.conn.execute(query)).mappings().all()
        cipher = await self.cipher(user_id) if rows else None
        return [
            EvictionRow(
                memory_id=r["memory_id"],
                user_id=user_id,
                app_id=r["app_id"],
                weight=r["weight"],
                weight_at=r["weight_at"],
                is_important=r["is_important"],
                last_recalled_at=r["last_recalled_at"],
                custom_tags=open_labels(cipher, r)[0] if cipher is not None else [],
            )
            for r in rows
        ]

    async def load_memories(self, user_id: str, query: Select[Any]) -> list[Memory]:
        """Run a select of whole memory rows of one user and decrypt them (queries built elsewhere)."""
        return await self._load(user_id, query)

    async def load_changes(self, user_id: str, query: Select[Any]) -> list[ChangeLogEntry]:
        """Run a select of whole change-log rows of one user and decrypt them."""
        return await self._load_changes(user_id, query)

    async def _load(self, user_id: str, query: Select[Any]) -> list[Memory]:
        rows = (await self.conn.execute(query)).mappings().all()
        if not rows:
            return []
        # A read never makes a key: a purged user's rows read as content-less (P8).
        cipher = await self.existing_cipher(user_id)
        return [_from_row(row, cipher) for row in rows]

    async def _to_row(self, memory: Memory) -> dict[str, Any]:
        if memory.content is None:
            raise ValueError("a memory without readable content cannot be written")
        cipher = await self.cipher(memory.user_id)
        return {
            "memory_id": memory.memory_id,
            "user_id": memory.user_id,
            "app_id": memory.app_id,
            "session_id": memory.session_id,
            "level": memory.level.value,
            "ownership": memory.ownership.value,
            "mem_type": memory.mem_type.value,
            "content": cipher.encrypt(memory.content),
            "weight": memory.weight,
            "weight_at": memory.weight_at,
            "status": memory.status.value,
            "is_important": memory.is_important,
            "recall_count": memory.recall_count,
            "created_at": memory.created_at,
            "updated_at": memory.updated_at,
            "last_recalled_at": memory.last_recalled_at,
            "expire_at": memory.expire_at,
            "archived_at": memory.archived_at,
            "deleted_at": memory.deleted_at,
            "content_hash": memory.content_hash,
            "source_session_id": memory.source_session_id,
            "source_msg_id": memory.source_msg_id,
            "custom_tags": [],
            "entities": [],
            "labels": seal_labels(cipher, memory.memory_id, memory.custom_tags, memory.entities),
            "vector_ref": memory.vector_ref,
            "embedding_model": memory.embedding_model,
            "valid_at": memory.valid_at,
            "invalid_at": memory.invalid_at,
            "superseded_by": memory.superseded_by,
            "confidence": memory.confidence,
            "source_type": memory.source_type,
        }

    # --- change log ---------------------------------------------------------------------------

    async def mark_status(
        self, user_id: str, memory_ids: Sequence[str], status: Status, at: datetime
    ) -> None:
        """Move memories to ARCHIVED or DELETED at ``at`` without touching their content."""
        stamps: dict[str, Any] = {"status": status.value, "updated_at": at}
        if status is Status.ARCHIVED:
            stamps["archived_at"] = at
        elif status is Status.DELETED:
            stamps["deleted_at"] = at
        else:
            raise ValueError(f"mark_status handles ARCHIVED and DELETED, not {status}")
        await self.conn.execute(
            update(memories)
            .where(and_(memories.c.user_id == user_id, memories.c.memory_id.in_(list(memory_ids))))
            .values(**stamps)
        )

    async def record_recall_hits(
        self, user_id: str, hits: Mapping[str, tuple[float, int]], at: datetime
    ) -> None:
        """Store many hits' bookkeeping (memory_id -> (weight, recall_count)) in one statement.

        Rows that are no longer ACTIVE are left alone; callers read the rows in the same
        transaction, so they know which ones those are.
        """
        if not hits:
            return
        statement = (
            update(memories)
            .where(
                and_(
                    memories.c.user_id == bindparam("b_user_id"),
                    memories.c.memory_id == bindparam("b_memory_id"),
                    memories.c.status == Status.ACTIVE.value,
                )
            )
            .values(
                weight=bindparam("b_weight"),
                weight_at=bindparam("b_at"),
                last_recalled_at=bindparam("b_at"),
                recall_count=bindparam("b_count"),
            )
        )
        rows = [
            {"b_user_id": user_id, "b_memory_id": m, "b_weight": w, "b_at": at, "b_count": c}
            for m, (w, c) in hits.items()
        ]
        await self.conn.execute(statement, rows)

    async def recently_active_users(self, limit: int) -> list[str]:
        """Users whose memories were written or recalled most recently, most recent first."""
        last_active = func.max(func.coalesce(memories.c.last_recalled_at, memories.c.updated_at))
        query = (
            select(memories.c.user_id)
            .where(memories.c.status == Status.ACTIVE.value)
            .group_by(memories.c.user_id)
            .order_by(last_active.desc(), memories.c.user_id)
            .limit(limit)
        )
        return [str(user_id) for user_id in (await self.conn.execute(query)).scalars()]

    async def recall_bookkeeping(self, user_id: str) -> dict[str, RecallBookkeeping]:
        """Weight and hit columns of the user's ACTIVE memories (no content: nothing to decrypt)."""
        query = select(
            memories.c.memory_id,
            memories.c.weight,
            memories.c.weight_at,
            memories.c.recall_count,
            memories.c.last_recalled_at,
        ).where(and_(memories.c.user_id == user_id, memories.c.status == Status.ACTIVE.value))
        return {
            row.memory_id: RecallBookkeeping(
                row.weight, row.weight_at, row.recall_count, row.last_recalled_at
            )
            for row in (await self.conn.execute(query)).all()
        }

    async def add_change(
        self,
        memory: Memory | EvictionRow,
        op_type: OpType,
        op_source: OpSource,
        reason: str,
        at: datetime,
        *,
        content_before: str | None = None,
        content_after: str | None = None,
    ) -> None:
        """Append one change-log entry; contents are encrypted like the memory's."""
        cipher = await self.cipher(memory.user_id)
        await self.conn.execute(
            change_log.insert().values(
                memory_id=memory.memory_id,
                user_id=memory.user_id,
                app_id=memory.app_id,
                op_type=op_type.value,
                op_source=op_source.value,
                op_time=at,
                reason="",
                reason_sealed=seal_reason(cipher, memory.memory_id, reason),
                content_before=None if content_before is None else cipher.encrypt(content_before),
                content_after=None if content_after is None else cipher.encrypt(content_after),
                sanitized=False,
            )
        )

    async def add_new_memory_changes(
        self, rows: Sequence[Memory], op_source: OpSource, reason: str, at: datetime
    ) -> None:
        """The ADD entries of several new memories in one statement (as ``add_change`` writes each)."""
        if not rows:
            return
        values = []
        for memory in rows:
            cipher = await self.cipher(memory.user_id)
            values.append(
                {
                    "memory_id": memory.memory_id,
                    "user_id": memory.user_id,
                    "app_id": memory.app_id,
                    "op_type": OpType.ADD.value,
                    "op_source": op_source.value,
                    "op_time": at,
                    "reason": "",
                    "reason_sealed": seal_reason(cipher, memory.memory_id, reason),
                    "content_before": None,
                    "content_after": None if memory.content is None else cipher.encrypt(memory.content),
                    "sanitized": False,
                }
            )
        await self.conn.execute(change_log.insert(), values)

    async def history(self, user_id: str, memory_id: str) -> list[ChangeLogEntry]:
        """Every change of one memory, oldest first."""
        query = (
            select(change_log)
            .where(and_(change_log.c.user_id == user_id, change_log.c.memory_id == memory_id))
            .order_by(change_log.c.change_id)
        )
        return await self._load_changes(user_id, query)

    async def change_log(
        self,
        user_id: str,
        *,
        app_id: str | None = None,
        op_type: OpType | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        before_change_id: int | None = None,
        limit: int = 50,
    ) -> list[ChangeLogEntry]:
        """The user's changes, newest first, filtered by dimension, op and time range."""
        conditions = [change_log.c.user_id == user_id]
        if app_id is not None:
            conditions.append(change_log.c.app_id == app_id)
        if op_type is not None:
            conditions.append(change_log.c.op_type == op_type.value)
        if since is not None:
            conditions.append(change_log.c.op_time >= since)
        if until is not None:
            conditions.append(change_log.c.op_time < until)
        if before_change_id is not None:
            conditions.append(change_log.c.change_id < before_change_id)
        query = (
            select(change_log).where(and_(*conditions)).order_by(change_log.c.change_id.desc()).limit(limit)
        )
        return await self._load_changes(user_id, query)

    async def _load_changes(self, user_id: str, query: Select[Any]) -> list[ChangeLogEntry]:
        rows = (await self.conn.execute(query)).mappings().all()
        if not rows:
            return []
        # A read never makes a key: a purged user's log reads as its content-free entries (P8).
        cipher = await self.existing_cipher(user_id)
        return [_change_from_row(row, cipher) for row in rows]

    # --- counters and versions ----------------------------------------------------------------

    async def counters(self, user_id: str) -> dict[str, int]:
        """All capacity counters of the user, by dimension (O(1) per dimension, D3)."""
        query = select(capacity_counters.c.dimension, capacity_counters.c.count).where(
            capacity_counters.c.user_id == user_id
        )
        return dict((await self.conn.execute(query)).all())

    async def add_to_counters(self, user_id: str, deltas: Mapping[str, int]) -> None:
        """Add each delta to its dimension's counter, creating counters as needed."""
        for dimension, delta in deltas.items():
            if delta == 0:
                continue
            values = {"user_id": user_id, "dimension": dimension, "count": delta}
            statement = _upsert(self.conn, capacity_counters, values)
            await self.conn.execute(
                statement.on_conflict_do_update(
                    index_elements=["user_id", "dimension"],
                    set_={"count": capacity_counters.c.count + delta},
                )
            )

    async def set_counters(self, user_id: str, counts: Mapping[str, int]) -> None:
        """Overwrite counters with exact values (reconcile)."""
        for dimension, count in counts.items():
            values = {"user_id": user_id, "dimension": dimension, "count": count}
            statement = _upsert(self.conn, capacity_counters, values)
            await self.conn.execute(
                statement.on_conflict_do_update(
                    index_elements=["user_id", "dimension"], set_={"count": count}
                )
            )

    async def count_active(self, user_id: str) -> dict[tuple[str, bool], int]:
        """Active memories of the user counted by (app_id, is_important), from the rows themselves."""
        query = (
            select(memories.c.app_id, memories.c.is_important, func.count())
            .where(and_(memories.c.user_id == user_id, memories.c.status == Status.ACTIVE.value))
            .group_by(memories.c.app_id, memories.c.is_important)
        )
        return {(app, bool(imp)): n for app, imp, n in (await self.conn.execute(query)).all()}

    async def bump_version(self, user_id: str) -> int:
        """Advance the user's change version (recall caches compare it) and return it."""
        statement = _upsert(self.conn, user_versions, {"user_id": user_id, "version": 1})
        await self.conn.execute(
            statement.on_conflict_do_update(
                index_elements=["user_id"], set_={"version": user_versions.c.version + 1}
            )
        )
        return await self.version(user_id)

    async def version(self, user_id: str) -> int:
        """The user's current change version (0 before any change)."""
        query = select(user_versions.c.version).where(user_versions.c.user_id == user_id)
        value = (await self.conn.execute(query)).scalar_one_or_none()
        return int(value or 0)

    # --- write tasks (W1, W2) -----------------------------------------------------------------

    async def insert_task(self, task: WriteTask) -> None:
        """Record an accepted write; its payload and decisions are encrypted like content."""
        await self.insert_tasks([task])

    async def insert_tasks(self, tasks: Sequence[WriteTask]) -> None:
        """Record accepted writes in one statement (a group commit), encrypted like content."""
        if not tasks:
            return
        await self.prefetch_ciphers(task.user_id for task in tasks)
        rows = []
        for task in tasks:
            cipher = await self.cipher(task.user_id)
            app_id, reach = task_reach(task.kind, task.payload)
            rows.append(
                {
                    "task_id": task.task_id,
                    "app_id": app_id,
                    "reach": reach,
                    "user_id": task.user_id,
                    "kind": task.kind,
                    "status": task.status.value,
                    "payload": cipher.encrypt(json.dumps(task.payload)),
                    "result": cipher.encrypt(json.dumps(task.decisions)) if task.decisions else None,
                    "error": task.error,
                    "attempts": task.attempts,
                    "created_at": task.created_at,
                    "updated_at": task.updated_at,
                }
            )
        await self.conn.execute(write_tasks.insert(), rows)

    async def get_task(self, task_id: str, *, with_payload: bool = True) -> WriteTask | None:
        """One task with its payload and decisions decrypted, or None when unknown.

        ``with_payload=False`` leaves the payload out (empty) and unread: a status poll of a batch
        of 1,000 items then decrypts and parses only the decisions.
        """
        columns = [c for c in write_tasks.c if with_payload or c.name != "payload"]
        row = (
            (await self.conn.execute(select(*columns).where(write_tasks.c.task_id == task_id)))
            .mappings()
            .one_or_none()
        )
        if row is None:
            return None
        return _task_from_row(row, await self.existing_cipher(row["user_id"]))

    async def task_owner(self, task_id: str) -> TaskOwner | None:
        """Whose the task is and who may read it (tenancy, P9), without decrypting anything."""
        columns = (write_tasks.c.user_id, write_tasks.c.kind, write_tasks.c.app_id, write_tasks.c.reach)
        row = (
            await self.conn.execute(select(*columns).where(write_tasks.c.task_id == task_id))
        ).one_or_none()
        if row is None:
            return None
        user_id, kind, app_id, reach = row
        # Not filled yet (a row from before migration 0008 the backfill has not reached): admin only.
        return TaskOwner(user_id, kind, app_id or "", reach or REACH_ADMIN)

    async def start_task(self, task_id: str, at: datetime) -> int:
        """Mark an unfinished task RUNNING and count the attempt; returns its attempts (0: none such)."""
        await self.conn.execute(
            update(write_tasks)
            .where(and_(write_tasks.c.task_id == task_id, write_tasks.c.status.in_(_UNFINISHED)))
            .values(status=TaskStatus.RUNNING.value, attempts=write_tasks.c.attempts + 1, updated_at=at)
        )
        query = select(write_tasks.c.attempts, write_tasks.c.status).where(write_tasks.c.task_id == task_id)
        row = (await self.conn.execute(query)).one_or_none()
        return int(row[0]) if row is not None and row[1] == TaskStatus.RUNNING.value else 0

    async def release_task(self, task_id: str) -> None:
        """Give back the attempt a running task counted: it failed for a passing reason and is
        retried (attempts count the starts a process died in, the crash-loop guard)."""
        await self.conn.execute(
            update(write_tasks)
            .where(
                and_(
                    write_tasks.c.task_id == task_id,
                    write_tasks.c.status == TaskStatus.RUNNING.value,
                    write_tasks.c.attempts > 0,
                )
            )
            .values(attempts=write_tasks.c.attempts - 1)
        )

    async def get_tasks(self, task_ids: Sequence[str]) -> dict[str, WriteTask]:
        """Several tasks by id (unknown ids are absent), decrypted, in one query."""
        if not task_ids:
            return {}
        rows = (
            (await self.conn.execute(select(write_tasks).where(write_tasks.c.task_id.in_(list(task_ids)))))
            .mappings()
            .all()
        )
        await self.prefetch_existing_ciphers(row["user_id"] for row in rows)
        return {
            row["task_id"]: _task_from_row(row, await self.existing_cipher(row["user_id"])) for row in rows
        }

    async def start_tasks(self, task_ids: Sequence[str], at: datetime) -> dict[str, int]:
        """``start_task`` for several tasks in two statements: each id's attempts (0: none such)."""
        if not task_ids:
            return {}
        ids = list(task_ids)
        await self.conn.execute(
            update(write_tasks)
            .where(and_(write_tasks.c.task_id.in_(ids), write_tasks.c.status.in_(_UNFINISHED)))
            .values(status=TaskStatus.RUNNING.value, attempts=write_tasks.c.attempts + 1, updated_at=at)
        )
        query = select(write_tasks.c.task_id, write_tasks.c.attempts, write_tasks.c.status).where(
            write_tasks.c.task_id.in_(ids)
        )
        found = {
            tid: int(n) if status == TaskStatus.RUNNING.value else 0
            for tid, n, status in (await self.conn.execute(query)).all()
        }
        return {tid: found.get(tid, 0) for tid in ids}

    async def unfinished_among(self, task_ids: Sequence[str]) -> set[str]:
        """Which of these tasks are still unfinished (locked until the commit where that exists)."""
        if not task_ids:
            return set()
        query = (
            select(write_tasks.c.task_id)
            .where(and_(write_tasks.c.task_id.in_(list(task_ids)), write_tasks.c.status.in_(_UNFINISHED)))
            .with_for_update()
        )
        return {row[0] for row in (await self.conn.execute(query)).all()}

    async def finish_tasks(self, outcomes: Sequence[TaskOutcome], at: datetime) -> None:
        """``finish_task`` for several unfinished tasks in one statement (check them first with
        ``unfinished_among``: the count of rows an executemany changed is not reported everywhere)."""
        if not outcomes:
            return
        await self.prefetch_ciphers(outcome.user_id for outcome in outcomes)
        values = []
        for outcome in outcomes:
            cipher = await self.cipher(outcome.user_id)
            result = None if outcome.decisions is None else cipher.encrypt(json.dumps(outcome.decisions))
            values.append(
                {
                    "tid": outcome.task_id,
                    "new_status": outcome.status.value,
                    "res": result,
                    "err": outcome.error,
                }
            )
        statement = (
            update(write_tasks)
            # No IN (...) here: an expanding list cannot be used with executemany.
            .where(
                and_(
                    write_tasks.c.task_id == bindparam("tid"),
                    or_(*(write_tasks.c.status == status for status in _UNFINISHED)),
                )
            )
            # A finished task keeps no payload (P8): the request was only needed to replay it.
            .values(
                status=bindparam("new_status"),
                payload=b"",
                result=bindparam("res"),
                error=bindparam("err"),
                updated_at=at,
            )
        )
        await self.conn.execute(statement, values)

    async def finish_task(
        self,
        task_id: str,
        status: TaskStatus,
        *,
        decisions: list[dict[str, Any]] | None,
        error: str | None,
        at: datetime,
    ) -> bool:
        """Move an unfinished task to DONE or FAILED; False when it was unknown or already finished.

        The condition on the current status is what makes a second, concurrent finisher (another
        process replaying the same task) see False and roll its work back.
        """
        if status not in (TaskStatus.DONE, TaskStatus.FAILED):
            raise ValueError(f"finish_task ends a task as DONE or FAILED, not {status}")
        owner = (
            await self.conn.execute(select(write_tasks.c.user_id).where(write_tasks.c.task_id == task_id))
        ).scalar_one_or_none()
        if owner is None:
            return False
        cipher = await self.cipher(owner)
        result = await self.conn.execute(
            update(write_tasks)
            .where(and_(write_tasks.c.task_id == task_id, write_tasks.c.status.in_(_UNFINISHED)))
            .values(
                status=status.value,
                payload=b"",  # a finished task keeps no payload (P8)
                result=None if decisions is None else cipher.encrypt(json.dumps(decisions)),
                error=error,
                updated_at=at,
            )
        )
        return bool(result.rowcount)

    async def unfinished_tasks(
        self, limit: int = 1000, *, after: tuple[datetime, str] | None = None
    ) -> list[WriteTask]:
        """PENDING or RUNNING tasks, oldest first; ``after`` (created_at, task_id) pages on."""
        conditions: list[ColumnElement[bool]] = [write_tasks.c.status.in_(_UNFINISHED)]
        if after is not None:
            conditions.append(keyset_after(write_tasks.c.created_at, write_tasks.c.task_id, after))
        query = (
            select(write_tasks)
            .where(and_(*conditions))
            .order_by(write_tasks.c.created_at, write_tasks.c.task_id)
            .limit(limit)
        )
        rows = (await self.conn.execute(query)).mappings().all()
        return [_task_from_row(row, await self.existing_cipher(row["user_id"])) for row in rows]


def _upsert(conn: AsyncConnection, table: Any, values: dict[str, Any]) -> Any:
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table).values(**values)


def _from_row(row: RowMapping, cipher: ContentCipher | None) -> Memory:
    tags, entities = open_labels(cipher, row)
    return Memory(
        memory_id=row["memory_id"],
        user_id=row["user_id"],
        app_id=row["app_id"],
        session_id=row["session_id"],
        level=Level(row["level"]),
        ownership=Ownership(row["ownership"]),
        mem_type=MemType(row["mem_type"]),
        content=_open(cipher, row["content"]),
        weight=row["weight"],
        weight_at=row["weight_at"],
        status=Status(row["status"]),
        is_important=row["is_important"],
        recall_count=row["recall_count"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        last_recalled_at=row["last_recalled_at"],
        expire_at=row["expire_at"],
        archived_at=row["archived_at"],
        deleted_at=row["deleted_at"],
        content_hash=row["content_hash"],
        source_session_id=row["source_session_id"],
        source_msg_id=row["source_msg_id"],
        custom_tags=tags,
        entities=entities,
        vector_ref=row["vector_ref"],
        embedding_model=row["embedding_model"],
        valid_at=row["valid_at"],
        invalid_at=row["invalid_at"],
        superseded_by=row["superseded_by"],
        confidence=row["confidence"],
        source_type=row["source_type"],
    )


def _open(cipher: ContentCipher | None, blob: Any) -> str | None:
    """A sealed column's text; None when absent or when it does not open (no key, another key)."""
    return None if not blob or cipher is None else cipher.decrypt(bytes(blob))


def _change_from_row(row: RowMapping, cipher: ContentCipher | None) -> ChangeLogEntry:
    return ChangeLogEntry(
        change_id=row["change_id"],
        memory_id=row["memory_id"],
        user_id=row["user_id"],
        app_id=row["app_id"],
        op_type=OpType(row["op_type"]),
        op_source=OpSource(row["op_source"]),
        op_time=row["op_time"],
        reason=open_reason(cipher, row),
        content_before=_open(cipher, row["content_before"]),
        content_after=_open(cipher, row["content_after"]),
        sanitized=row["sanitized"],
    )


def _task_from_row(row: RowMapping, cipher: ContentCipher | None) -> WriteTask:
    # An unreadable blob (the user's key was shredded) reads as empty: the payload cannot be replayed.
    payload = _open(cipher, row["payload"]) if "payload" in row else None
    result = _open(cipher, row["result"])
    return WriteTask(
        task_id=row["task_id"],
        user_id=row["user_id"],
        kind=row["kind"],
        status=TaskStatus(row["status"]),
        payload=json.loads(payload) if payload else {},
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        decisions=json.loads(result) if result else [],
        error=row["error"],
        attempts=row["attempts"],
    )


# --- sealed labels and reasons (migration 0005) ------------------------------------------------


def seal_labels(cipher: ContentCipher, memory_id: str, tags: Sequence[str], entities: Sequence[str]) -> bytes:
    """A memory's custom tags and entity names, sealed with its user's key and bound to the memory."""
    body = json.dumps({"tags": list(tags), "entities": list(entities)}, ensure_ascii=False)
    return cipher.seal_bytes(body.encode(), f"labels:{memory_id}")


def open_labels(cipher: ContentCipher | None, row: RowMapping) -> tuple[list[str], list[str]]:
    """(tags, entities) of a row: sealed ones, else a row written before 0005, else none (no key)."""
    blob = row["labels"]
    if blob is None:
        return list(row["custom_tags"]), list(row["entities"])
    if cipher is None:
        return [], []
    opened = cipher.open_bytes(bytes(blob), f"labels:{row['memory_id']}")
    if opened is None:
        return [], []
    data = json.loads(opened)
    return list(data["tags"]), list(data["entities"])


def seal_reason(cipher: ContentCipher, memory_id: str, reason: str) -> bytes:
    """A change reason (which may quote the fact), sealed with the user's key."""
    return cipher.seal_bytes(reason.encode(), f"reason:{memory_id}")


def open_reason(cipher: ContentCipher | None, row: RowMapping) -> str:
    """A change entry's reason: the sealed one, else the plain column ("" once the key is shredded)."""
    blob = row["reason_sealed"]
    if blob is None:
        return str(row["reason"])
    if cipher is None:
        return ""
    opened = cipher.open_bytes(bytes(blob), f"reason:{row['memory_id']}")
    return "" if opened is None else opened.decode()
