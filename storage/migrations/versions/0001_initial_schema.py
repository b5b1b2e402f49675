"""Initial schema: memories, change log, counters, switches, write tasks, data keys, versions.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engram.storage.schema import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_BIGINT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "memories",
        sa.Column("memory_id", sa.String(32), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("app_id", sa.String(128), nullable=False),
        sa.Column("session_id", sa.String(128)),
        sa.Column("level", sa.String(16), nullable=False),
        sa.Column("ownership", sa.String(16), nullable=False),
        sa.Column("mem_type", sa.String(16), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("weight_at", UTCDateTime(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("is_important", sa.Boolean(), nullable=False),
        sa.Column("recall_count", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("last_recalled_at", UTCDateTime()),
        sa.Column("expire_at", UTCDateTime()),
        sa.Column("archived_at", UTCDateTime()),
        sa.Column("deleted_at", UTCDateTime()),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("source_session_id", sa.String(128)),
        sa.Column("source_msg_id", sa.String(128)),
        sa.Column("custom_tags", sa.JSON(), nullable=False),
        sa.Column("vector_ref", sa.String(32)),
        sa.Column("embedding_model", sa.String(128), nullable=False),
        sa.Column("valid_at", UTCDateTime(), nullable=False),
        sa.Column("invalid_at", UTCDateTime()),
        sa.Column("superseded_by", sa.String(32)),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("source_type", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("memory_id", name="pk_memories"),
    )
    op.create_index(
        "ix_memories_user_id_app_id_level_ownership_mem_type_status",
        "memories",
        ["user_id", "app_id", "level", "ownership", "mem_type", "status"],
    )
    op.create_index(
        "ix_memories_user_id_level_app_id_weight_last_recalled_at",
        "memories",
        ["user_id", "level", "app_id", "weight", "last_recalled_at"],
    )
    op.create_index("ix_memories_user_id_content_hash", "memories", ["user_id", "content_hash"])
    for column in ("weight", "expire_at", "archived_at", "deleted_at"):
        op.create_index(f"ix_memories_status_{column}", "memories", ["status", column])

    op.create_table(
        "change_log",
        sa.Column("change_id", _BIGINT, autoincrement=True, nullable=False),
        sa.Column("memory_id", sa.String(32), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("app_id", sa.String(128), nullable=False),
        sa.Column("op_type", sa.String(16), nullable=False),
        sa.Column("op_source", sa.String(16), nullable=False),
        sa.Column("op_time", UTCDateTime(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("content_before", sa.LargeBinary()),
        sa.Column("content_after", sa.LargeBinary()),
        sa.Column("sanitized", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("change_id", name="pk_change_log"),
    )
    op.create_index("ix_change_log_user_id_op_time", "change_log", ["user_id", "op_time"])
    op.create_index("ix_change_log_memory_id_change_id", "change_log", ["memory_id", "change_id"])

    op.create_table(
        "capacity_counters",
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("dimension", sa.String(160), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("user_id", "dimension", name="pk_capacity_counters"),
    )
    op.create_table(
        "switches",
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("app_id", sa.String(128), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("user_id", "app_id", name="pk_switches"),
    )
    op.create_table(
        "write_tasks",
        sa.Column("task_id", sa.String(32), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("result", sa.LargeBinary()),
        sa.Column("error", sa.Text()),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("task_id", name="pk_write_tasks"),
    )
    op.create_index("ix_write_tasks_status_created_at", "write_tasks", ["status", "created_at"])
    op.create_index("ix_write_tasks_user_id_created_at", "write_tasks", ["user_id", "created_at"])

    op.create_table(
        "user_keys",
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("wrapped_key", sa.LargeBinary(), nullable=False),
        sa.Column("master_key_id", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("user_id", name="pk_user_keys"),
    )
    op.create_table(
        "user_versions",
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("version", _BIGINT, nullable=False),
        sa.PrimaryKeyConstraint("user_id", name="pk_user_versions"),
    )


def downgrade() -> None:
    for table in ("user_versions", "user_keys", "write_tasks", "switches", "capacity_counters"):
        op.drop_table(table)
    op.drop_table("change_log")
    op.drop_table("memories")
