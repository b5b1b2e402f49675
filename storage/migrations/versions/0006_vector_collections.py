"""Which embedding model each vector collection holds.

A process checks its embedder against this record when it opens the vector store, so that a change
of model can never write vectors of a second model into a collection of the first (the dimension
check alone misses two models of the same dimension). A collection in use before this revision is
recorded with the model of the first process that opens it after the upgrade.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engram.storage.schema import UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "vector_collections",
        sa.Column("collection", sa.String(255), nullable=False),
        sa.Column("embedding_model", sa.String(128), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("collection", name="pk_vector_collections"),
    )


def downgrade() -> None:
    op.drop_table("vector_collections")
