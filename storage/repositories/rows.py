"""Rows to records and back: what is sealed with a user's key and how it opens (content, labels,
reasons, task payloads), and the small statement helpers the repositories share."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from engram.models.domain import ChangeLogEntry, Memory, WriteTask
from engram.models.enums import Level, MemType, OpSource, OpType, Ownership, Status, TaskStatus
from engram.storage.crypto import ContentCipher

# A row as SQLAlchemy gives it, or as a plain read built it (storage/quick_reads.py).
AnyRow = RowMapping | Mapping[str, Any]


def keyset_after(
    created: ColumnElement[Any], key: ColumnElement[Any], after: tuple[datetime, str]
) -> ColumnElement[bool]:
    """Rows after ``after`` (created_at, id) in (created_at, id) order: one page boundary."""
    created_at, last_key = after
    return or_(created > created_at, and_(created == created_at, key > last_key))


def upsert(conn: AsyncConnection, table: Any, values: dict[str, Any]) -> Any:
    """An INSERT of ``values`` in the connection's dialect, ready for ``on_conflict_do_update``."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table).values(**values)


def memory_from_row(row: AnyRow, cipher: ContentCipher | None) -> Memory:
    """A memory row, opened with its user's cipher (None: content and labels read as absent)."""
    tags, entities = open_labels(cipher, row)
    return Memory(
        memory_id=row["memory_id"],
        user_id=row["user_id"],
        app_id=row["app_id"],
        session_id=row["session_id"],
        level=Level(row["level"]),
        ownership=Ownership(row["ownership"]),
        mem_type=MemType(row["mem_type"]),
        content=open_sealed(cipher, row["content"]),
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
        context=open_sealed(cipher, row["context"]),
    )


def open_sealed(cipher: ContentCipher | None, blob: Any) -> str | None:
    """A sealed column's text; None when absent or when it does not open (no key, another key)."""
    return None if not blob or cipher is None else cipher.decrypt(bytes(blob))


def change_from_row(row: RowMapping, cipher: ContentCipher | None) -> ChangeLogEntry:
    """A change-log row, opened with its user's cipher."""
    return ChangeLogEntry(
        change_id=row["change_id"],
        memory_id=row["memory_id"],
        user_id=row["user_id"],
        app_id=row["app_id"],
        op_type=OpType(row["op_type"]),
        op_source=OpSource(row["op_source"]),
        op_time=row["op_time"],
        reason=open_reason(cipher, row),
        content_before=open_sealed(cipher, row["content_before"]),
        content_after=open_sealed(cipher, row["content_after"]),
        sanitized=row["sanitized"],
    )


def task_from_row(row: RowMapping, cipher: ContentCipher | None) -> WriteTask:
    """A write-task row, its payload (when selected) and decisions opened."""
    # An unreadable blob (the user's key was shredded) reads as empty: the payload cannot be replayed.
    payload = open_sealed(cipher, row["payload"]) if "payload" in row else None
    result = open_sealed(cipher, row["result"])
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


def open_labels(cipher: ContentCipher | None, row: AnyRow) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(tags, entities) of a row: sealed ones, else a row written before 0005, else none (no key)."""
    blob = row["labels"]
    if blob is None:
        return tuple(row["custom_tags"]), tuple(row["entities"])
    if cipher is None:
        return (), ()
    opened = cipher.open_bytes(bytes(blob), f"labels:{row['memory_id']}")
    if opened is None:
        return (), ()
    data = json.loads(opened)
    return tuple(data["tags"]), tuple(data["entities"])


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
