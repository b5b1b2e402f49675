"""Metadata queries of the privacy routes (SPEC P1, P2): switches, listing, purge marks, export pages.

Plain functions over a ``MetadataTx`` so that they join the caller's transaction. Every query is
bound to one user_id; values only ever reach SQL as bound parameters.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from engram.models.domain import ChangeLogEntry, Memory
from engram.models.enums import Level, MemType, OpSource, OpType, Status, TaskStatus
from engram.storage.metadata import MetadataTx
from engram.storage.repositories.rows import keyset_after, seal_reason
from engram.storage.schema import capacity_counters, change_log, memories, switches, write_tasks

_FINISHED = (TaskStatus.DONE.value, TaskStatus.FAILED.value)


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """A dimension of one user's memories: any field left None matches everything."""

    user_id: str
    app_id: str | None = None
    level: Level | None = None
    mem_type: MemType | None = None
    statuses: tuple[Status, ...] | None = None
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class PurgeRow:
    """What a purge needs of a memory: no content."""

    memory_id: str
    app_id: str
    status: Status
    is_important: bool


def _conditions(flt: MemoryFilter) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = [memories.c.user_id == flt.user_id]
    if flt.app_id is not None:
        conditions.append(memories.c.app_id == flt.app_id)
    if flt.session_id is not None:
        conditions.append(memories.c.session_id == flt.session_id)
    if flt.level is not None:
        conditions.append(memories.c.level == flt.level.value)
    if flt.mem_type is not None:
        conditions.append(memories.c.mem_type == flt.mem_type.value)
    if flt.statuses is not None:
        conditions.append(memories.c.status.in_([s.value for s in flt.statuses]))
    return conditions


# --- switches (P1, D4) ------------------------------------------------------------------------


async def get_switches(tx: MetadataTx, user_id: str) -> dict[str, bool]:
    """The user's switches by app_id ("" is the global switch); absent means on."""
    return await read_switches(tx.conn, user_id)


async def read_switches(conn: AsyncConnection, user_id: str) -> dict[str, bool]:
    """``get_switches`` on a bare connection (the ingress reads switches without a key ring)."""
    query = select(switches.c.app_id, switches.c.enabled).where(switches.c.user_id == user_id)
    return {app: bool(enabled) for app, enabled in (await conn.execute(query)).all()}


async def set_switch(tx: MetadataTx, user_id: str, app_id: str, enabled: bool, at: datetime) -> None:
    """Turn the user's global switch (app_id "") or one app's switch on or off."""
    values = {"user_id": user_id, "app_id": app_id, "enabled": enabled, "updated_at": at}
    dialect = postgresql if tx.conn.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(switches).values(**values)
    await tx.conn.execute(
        statement.on_conflict_do_update(
            index_elements=["user_id", "app_id"], set_={"enabled": enabled, "updated_at": at}
        )
    )


# --- listing and export pages ---------------------------------------------------------------


async def memory_page(
    tx: MetadataTx, flt: MemoryFilter, *, after: tuple[datetime, str] | None, limit: int
) -> list[Memory]:
    """One page of the user's memories in (created_at, memory_id) order, starting after ``after``."""
    conditions = _conditions(flt)
    if after is not None:
        conditions.append(keyset_after(memories.c.created_at, memories.c.memory_id, after))
    query = (
        select(memories)
        .where(and_(*conditions))
        .order_by(memories.c.created_at, memories.c.memory_id)
        .limit(limit)
    )
    return await tx.memories.load(flt.user_id, query)


async def changes_of(tx: MetadataTx, user_id: str, memory_ids: Sequence[str]) -> list[ChangeLogEntry]:
    """Every change-log entry of these memories of the user, oldest first."""
    if not memory_ids:
        return []
    query = (
        select(change_log)
        .where(and_(change_log.c.user_id == user_id, change_log.c.memory_id.in_(list(memory_ids))))
        .order_by(change_log.c.change_id)
    )
    return await tx.changes.load(user_id, query)


async def owners_of(tx: MetadataTx, memory_ids: Sequence[str]) -> dict[str, str]:
    """The user owning each of these memory ids, of every user (import uses it to avoid collisions)."""
    if not memory_ids:
        return {}
    query = select(memories.c.memory_id, memories.c.user_id).where(memories.c.memory_id.in_(list(memory_ids)))
    return dict((await tx.conn.execute(query)).all())


async def memory_apps(tx: MetadataTx, user_id: str, memory_ids: Sequence[str]) -> dict[str, str]:
    """The app_id ("" = global) of each of the user's memories among ``memory_ids``."""
    if not memory_ids:
        return {}
    query = select(memories.c.memory_id, memories.c.app_id).where(
        and_(memories.c.user_id == user_id, memories.c.memory_id.in_(list(memory_ids)))
    )
    return dict((await tx.conn.execute(query)).all())


async def task_ids(tx: MetadataTx, user_id: str, kind: str) -> list[str]:
    """Ids of the user's write tasks of one kind (exports, for purge to remove their files)."""
    query = select(write_tasks.c.task_id).where(
        and_(write_tasks.c.user_id == user_id, write_tasks.c.kind == kind)
    )
    return [row[0] for row in (await tx.conn.execute(query)).all()]


async def insert_change(tx: MetadataTx, entry: ChangeLogEntry) -> None:
    """Append an existing change-log entry as it was (import); a fresh change_id is assigned."""
    cipher = await tx.keys.cipher(entry.user_id)
    await tx.conn.execute(
        change_log.insert().values(
            memory_id=entry.memory_id,
            user_id=entry.user_id,
            app_id=entry.app_id,
            op_type=entry.op_type.value,
            op_source=entry.op_source.value,
            op_time=entry.op_time,
            # Sealed like content (an imported reason may quote the fact, P8); never in the clear.
            reason="",
            reason_sealed=seal_reason(cipher, entry.memory_id, entry.reason) if entry.reason else None,
            content_before=None if entry.content_before is None else cipher.encrypt(entry.content_before),
            content_after=None if entry.content_after is None else cipher.encrypt(entry.content_after),
            sanitized=entry.sanitized,
        )
    )


async def delete_changes(tx: MetadataTx, user_id: str, memory_ids: Sequence[str]) -> None:
    """Drop the change log of these memories (an overwriting import replaces it with the imported one)."""
    if memory_ids:
        await tx.conn.execute(
            delete(change_log).where(
                and_(change_log.c.user_id == user_id, change_log.c.memory_id.in_(list(memory_ids)))
            )
        )


# --- purge (P2) -------------------------------------------------------------------------------


async def purge_rows(tx: MetadataTx, flt: MemoryFilter) -> list[PurgeRow]:
    """The memories a purge of this dimension takes: every one not already deleted."""
    conditions = [*_conditions(flt), memories.c.status != Status.DELETED.value]
    query = select(memories.c.memory_id, memories.c.app_id, memories.c.status, memories.c.is_important).where(
        and_(*conditions)
    )
    return [
        PurgeRow(memory_id=r[0], app_id=r[1], status=Status(r[2]), is_important=bool(r[3]))
        for r in (await tx.conn.execute(query)).all()
    ]


async def mark_purged(
    tx: MetadataTx, user_id: str, memory_ids: Sequence[str], at: datetime, reason: str
) -> None:
    """Soft-delete for good: status DELETED at ``at``, content and plaintext tags wiped, history sanitized.

    The lifecycle sweep finds these rows by (status DELETED, deleted_at) and removes them physically;
    until then nothing of their content is left to read, whatever happens to the data key.
    """
    ids = list(memory_ids)
    if not ids:
        return
    await tx.conn.execute(
        update(memories)
        .where(and_(memories.c.user_id == user_id, memories.c.memory_id.in_(ids)))
        .values(
            status=Status.DELETED.value,
            deleted_at=at,
            updated_at=at,
            content=b"",
            context=None,
            custom_tags=[],
            entities=[],
            labels=None,
        )
    )
    await tx.conn.execute(
        update(change_log)
        .where(and_(change_log.c.user_id == user_id, change_log.c.memory_id.in_(ids)))
        # The plain reason too: rows from before 0005 (or an import of them) may still quote a fact.
        .values(content_before=None, content_after=None, reason="", reason_sealed=None, sanitized=True)
    )
    rows: list[dict[str, Any]] = [
        {
            "memory_id": memory_id,
            "user_id": user_id,
            "app_id": app_id,
            "op_type": OpType.PURGE.value,
            "op_source": OpSource.ADMIN.value,
            "op_time": at,
            "reason": reason,
            "content_before": None,
            "content_after": None,
            "sanitized": True,
        }
        for memory_id, app_id in (
            await tx.conn.execute(
                select(memories.c.memory_id, memories.c.app_id).where(
                    and_(memories.c.user_id == user_id, memories.c.memory_id.in_(ids))
                )
            )
        ).all()
    ]
    await tx.conn.execute(change_log.insert(), rows)


async def forget_tasks(tx: MetadataTx, user_id: str, at: datetime) -> None:
    """A full purge: finished write tasks (their payloads hold content) go, unfinished ones fail."""
    finished = (TaskStatus.DONE.value, TaskStatus.FAILED.value)
    await tx.conn.execute(
        delete(write_tasks).where(and_(write_tasks.c.user_id == user_id, write_tasks.c.status.in_(finished)))
    )
    await tx.conn.execute(
        update(write_tasks)
        .where(and_(write_tasks.c.user_id == user_id, write_tasks.c.status.notin_(finished)))
        .values(status=TaskStatus.FAILED.value, payload=b"", result=None, error="purged", updated_at=at)
    )


async def drop_counters(tx: MetadataTx, user_id: str) -> None:
    """Remove the user's counter rows (nothing of theirs is active any more)."""
    await tx.conn.execute(delete(capacity_counters).where(capacity_counters.c.user_id == user_id))


# --- write tasks: what a purge and the retention leave of them (P8) ----------------------------


def _scrubbed(decisions: list[dict[str, Any]], purged: set[str]) -> list[dict[str, Any]] | None:
    """Decisions with the content of purged memories (and of memory-less ones) removed; None when
    nothing of them changes."""
    changed = False
    out = []
    for decision in decisions:
        touched = decision.get("memory_id") is None or decision.get("memory_id") in purged
        if touched and decision.get("op") != "EXPORT" and (decision.get("content") or decision.get("reason")):
            decision = {**decision, "content": None, "reason": ""}
            changed = True
        out.append(decision)
    return out if changed else None


def _in_scope(payload: dict[str, Any], app_id: str | None, level: Level | None) -> bool:
    """Whether an unfinished write's request falls in the purged dimension (app and/or level)."""
    if app_id is not None and payload.get("app_id") != app_id:
        return False
    return level is None or payload.get("level") == level.value


async def scrub_tasks(
    tx: MetadataTx,
    user_id: str,
    purged: Sequence[str],
    *,
    app_id: str | None,
    level: Level | None,
    at: datetime,
) -> int:
    """An app or level purge: no task of the user keeps the text of what it purged.

    Finished tasks hold no payload; their decisions lose the content and reason of every purged
    memory (and of every memory-less decision, a skipped fact, whose scope is no longer known).
    An unfinished write into the purged dimension fails, its request dropped. Returns the tasks changed.
    """
    cipher = await tx.keys.existing(user_id)
    if cipher is None:
        return 0
    rows = (
        await tx.conn.execute(
            select(
                write_tasks.c.task_id, write_tasks.c.status, write_tasks.c.payload, write_tasks.c.result
            ).where(write_tasks.c.user_id == user_id)
        )
    ).all()
    gone = set(purged)
    changed = 0
    for task_id, status, payload, result in rows:
        values: dict[str, Any] = {}
        if status not in _FINISHED:
            opened = cipher.decrypt(bytes(payload)) if payload else None
            if opened is not None and _in_scope(json.loads(opened), app_id, level):
                values = {
                    "status": TaskStatus.FAILED.value,
                    "payload": b"",
                    "result": None,
                    "error": "purged",
                }
        elif payload:
            values["payload"] = b""
        if "result" not in values and result:
            opened = cipher.decrypt(bytes(result))
            scrubbed = _scrubbed(json.loads(opened), gone) if opened else None
            if scrubbed is not None:
                values["result"] = cipher.encrypt(json.dumps(scrubbed))
        if values:
            await tx.conn.execute(
                update(write_tasks).where(write_tasks.c.task_id == task_id).values(**values, updated_at=at)
            )
            changed += 1
    return changed


async def expire_tasks(tx: MetadataTx, user_id: str, before: datetime) -> list[tuple[str, str]]:
    """Delete the user's tasks finished before ``before`` (their decisions may quote content);
    returns (task_id, kind) of each, so that an export's file goes with its task."""
    condition = and_(
        write_tasks.c.user_id == user_id,
        write_tasks.c.status.in_(_FINISHED),
        write_tasks.c.updated_at < before,
    )
    found = [
        (str(task_id), str(kind))
        for task_id, kind in (
            await tx.conn.execute(select(write_tasks.c.task_id, write_tasks.c.kind).where(condition))
        ).all()
    ]
    if found:
        await tx.conn.execute(delete(write_tasks).where(condition))
    return found
