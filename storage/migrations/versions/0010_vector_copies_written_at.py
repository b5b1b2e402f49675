"""Sealed vector copies record when they were written (``memory_vectors.written_at``).

A cold recall answered from a Milvus server searches at Bounded consistency, which may not see a
vector written in the last seconds; it adds the user's copies written since then, found by
``(user_id, written_at)``. Copies written before this revision keep NULL: they are older than any
bound.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engram.storage.schema import UTCDateTime

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A nullable column without a default: no table rewrite on SQLite or PostgreSQL.
    op.add_column("memory_vectors", sa.Column("written_at", UTCDateTime(), nullable=True))
    op.create_index("ix_memory_vectors_user_id_written_at", "memory_vectors", ["user_id", "written_at"])


def downgrade() -> None:
    op.drop_index("ix_memory_vectors_user_id_written_at", table_name="memory_vectors")
    with op.batch_alter_table("memory_vectors") as batch:
        batch.drop_column("written_at")
