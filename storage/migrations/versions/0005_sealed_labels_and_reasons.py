"""Tags, entity names and content-bearing change reasons sealed with the user's key.

``memories.labels`` holds a memory's custom tags and entity names, ``change_log.reason_sealed`` a
reason written about the content (evolution, LLM); both encrypted with the user's data key, so
nothing a person said is readable at rest. Rows written before are re-sealed by the stores when
they open (``storage.reseal``); a migration has no keys.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("memories", sa.Column("labels", sa.LargeBinary(), nullable=True))
    op.add_column("change_log", sa.Column("reason_sealed", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    op.drop_column("change_log", "reason_sealed")
    op.drop_column("memories", "labels")
