"""A memory's context (``memories.context``): the message it answered, sealed with the user's key
like content, NULL when the writer gave none. Recall's lexicon indexes its words (#31).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A nullable column without a default: no table rewrite on SQLite or PostgreSQL.
    op.add_column("memories", sa.Column("context", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("memories") as batch:
        batch.drop_column("context")
