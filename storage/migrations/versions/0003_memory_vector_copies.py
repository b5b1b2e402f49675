"""Sealed copies of indexed vectors beside the metadata (recall snapshot loads).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_vectors",
        sa.Column("memory_id", sa.String(32), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("memory_id", name="pk_memory_vectors"),
    )
    op.create_index("ix_memory_vectors_user_id", "memory_vectors", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_memory_vectors_user_id", table_name="memory_vectors")
    op.drop_table("memory_vectors")
