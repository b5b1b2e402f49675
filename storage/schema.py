"""Relational schema of the metadata store (SPEC D1-D5) as SQLAlchemy Core tables.

Content columns hold AES-GCM ciphertext (``storage.crypto``); everything else is plain so the
store can filter, order and count without decrypting.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite keeps naive values)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the metadata store")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


ID = String(32)
SCOPE_ID = String(128)
ENUM = String(16)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
    }
)

memories = Table(
    "memories",
    metadata,
    Column("memory_id", ID, primary_key=True),
    Column("user_id", SCOPE_ID, nullable=False),
    Column("app_id", SCOPE_ID, nullable=False, default=""),
    Column("session_id", SCOPE_ID),
    Column("level", ENUM, nullable=False),
    Column("ownership", ENUM, nullable=False),
    Column("mem_type", ENUM, nullable=False),
    Column("content", LargeBinary, nullable=False),
    Column("weight", Float, nullable=False),
    Column("weight_at", UTCDateTime, nullable=False),
    Column("status", ENUM, nullable=False),
    Column("is_important", Boolean, nullable=False, default=False),
    Column("recall_count", Integer, nullable=False, default=0),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("last_recalled_at", UTCDateTime),
    Column("expire_at", UTCDateTime),
    Column("archived_at", UTCDateTime),
    Column("deleted_at", UTCDateTime),
    Column("content_hash", String(64), nullable=False),
    Column("source_session_id", SCOPE_ID),
    Column("source_msg_id", SCOPE_ID),
    # Rows written before migration 0005 held tags and entities here in the clear; now they are
    # empty and ``labels`` holds both, sealed with the user's key (the stores re-seal old rows).
    Column("custom_tags", JSON, nullable=False),
    Column("entities", JSON, nullable=False, server_default="[]"),
    Column("labels", LargeBinary),
    Column("vector_ref", ID),
    Column("embedding_model", String(128), nullable=False),
    Column("valid_at", UTCDateTime, nullable=False),
    Column("invalid_at", UTCDateTime),
    Column("superseded_by", ID),
    Column("confidence", Float, nullable=False, default=1.0),
    Column("source_type", String(32), nullable=False, default="conversation"),
    # The message the memory answered (Memory.context), sealed like content; NULL when none.
    Column("context", LargeBinary),
    # D5: the recall filter, the eviction order and the lifecycle scans.
    Index(None, "user_id", "app_id", "level", "ownership", "mem_type", "status"),
    Index(None, "user_id", "level", "app_id", "weight", "last_recalled_at"),
    # Per-user reads by status (snapshot weights, dedup): without them SQLite, having no
    # statistics, walked the status-led lifecycle indexes across every user (migration 0004).
    Index(None, "user_id", "status"),
    Index(None, "user_id", "content_hash", "status"),
    Index(None, "status", "weight"),
    Index(None, "status", "expire_at"),
    Index(None, "status", "archived_at"),
    Index(None, "status", "deleted_at"),
)

change_log = Table(
    "change_log",
    metadata,
    Column("change_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("memory_id", ID, nullable=False),
    Column("user_id", SCOPE_ID, nullable=False),
    Column("app_id", SCOPE_ID, nullable=False),
    Column("op_type", ENUM, nullable=False),
    Column("op_source", ENUM, nullable=False),
    Column("op_time", UTCDateTime, nullable=False),
    # System reasons (lifecycle, purge) stay readable for the audit trail; a reason about the
    # content (evolution, LLM) is sealed in reason_sealed and ``reason`` left empty (migration 0005).
    Column("reason", Text, nullable=False),
    Column("reason_sealed", LargeBinary),
    Column("content_before", LargeBinary),
    Column("content_after", LargeBinary),
    Column("sanitized", Boolean, nullable=False, default=False),
    Index(None, "user_id", "op_time"),
    Index(None, "memory_id", "change_id"),
)

capacity_counters = Table(
    "capacity_counters",
    metadata,
    Column("user_id", SCOPE_ID, primary_key=True),
    Column("dimension", String(160), primary_key=True),
    Column("count", Integer, nullable=False),
)

switches = Table(
    "switches",
    metadata,
    Column("user_id", SCOPE_ID, primary_key=True),
    # "" is the user's global switch; otherwise one app's switch.
    Column("app_id", SCOPE_ID, primary_key=True),
    Column("enabled", Boolean, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

write_tasks = Table(
    "write_tasks",
    metadata,
    Column("task_id", ID, primary_key=True),
    Column("user_id", SCOPE_ID, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("status", ENUM, nullable=False),
    Column("payload", LargeBinary, nullable=False),
    Column("result", LargeBinary),
    Column("error", Text),
    Column("attempts", Integer, nullable=False, default=0),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    # Who may read the task (models.rules.task_reach), kept apart from the payload (migration 0008).
    Column("app_id", SCOPE_ID),
    Column("reach", String(16)),
    Index(None, "status", "created_at"),
    Index(None, "user_id", "created_at"),
)

user_keys = Table(
    "user_keys",
    metadata,
    Column("user_id", SCOPE_ID, primary_key=True),
    Column("wrapped_key", LargeBinary, nullable=False),
    Column("master_key_id", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

memory_vectors = Table(
    "memory_vectors",
    metadata,
    # A sealed copy of each indexed vector beside the metadata, so that a recall snapshot loads a
    # user's vectors in one indexed read (milvus-lite: 14-28 ms per 100 ids by key, ~340 ms by user).
    Column("memory_id", ID, primary_key=True),
    Column("user_id", SCOPE_ID, nullable=False, index=True),
    Column("vector", LargeBinary, nullable=False),
    # When the copy was written, i.e. after its vector reached the index: a cold recall that asks
    # a Milvus server at Bounded consistency adds the copies written since the bound (migration 0010;
    # NULL for older copies).
    Column("written_at", UTCDateTime),
    Index(None, "user_id", "written_at"),
)

user_versions = Table(
    "user_versions",
    metadata,
    # Bumped with every committed change of a user: recall caches validate their snapshot with it.
    Column("user_id", SCOPE_ID, primary_key=True),
    Column("version", BigInteger().with_variant(Integer, "sqlite"), nullable=False),
)

vector_collections = Table(
    "vector_collections",
    metadata,
    # The embedding model whose vectors each vector collection holds: a process whose embedder is
    # another model refuses to open it (vectors of two models are never compared, O2).
    Column("collection", String(255), primary_key=True),
    Column("embedding_model", String(128), nullable=False),
    Column("dim", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

user_profiles = Table(
    "user_profiles",
    metadata,
    # The derived profile (L7) of a user ("" app: global facts only; else with one app's facts),
    # sealed with the user's key like memory content. Not a memory: never decays, never counted.
    Column("user_id", SCOPE_ID, primary_key=True),
    Column("app_id", SCOPE_ID, primary_key=True),
    Column("content", LargeBinary, nullable=False),
    # The user's change version it was built from: an older one means a refresh is due.
    Column("source_version", BigInteger().with_variant(Integer, "sqlite"), nullable=False),
    Column("refreshed_at", UTCDateTime, nullable=False),
)
