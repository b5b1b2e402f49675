"""Indexes that lead with the user for per-user reads filtered by status.

Without statistics SQLite chose the (status, ...) lifecycle indexes for "this user's ACTIVE rows"
and for the dedup hash lookup, walking every active memory of every user (~100k rows, tens of ms)
on each snapshot weight refresh and each add (docs/benchmarks.md).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_memories_user_id_status", "memories", ["user_id", "status"])
    op.drop_index("ix_memories_user_id_content_hash", table_name="memories")
    op.create_index(
        "ix_memories_user_id_content_hash_status", "memories", ["user_id", "content_hash", "status"]
    )


def downgrade() -> None:
    op.drop_index("ix_memories_user_id_content_hash_status", table_name="memories")
    op.create_index("ix_memories_user_id_content_hash", "memories", ["user_id", "content_hash"])
    op.drop_index("ix_memories_user_id_status", table_name="memories")
