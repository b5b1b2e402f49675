"""The derived user profile (L7): one sealed row per user and app.

The profile is rebuilt from the user's memories (by the sweep, after writes, or by the next read
of a stale one), so a database upgraded from 0006 starts with no profiles and loses nothing.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from engram.storage.schema import UTCDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "user_profiles",
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("app_id", sa.String(128), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("source_version", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("refreshed_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("user_id", "app_id", name="pk_user_profiles"),
    )


def downgrade() -> None:
    op.drop_table("user_profiles")
