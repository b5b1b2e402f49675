"""Who may read a write task, beside the task: ``write_tasks.app_id`` and ``reach`` (SPEC P9).

A task's app lived only in its encrypted payload, and finished tasks drop their payload, so the
tenancy check of ``task`` reads these columns instead (``models.rules.task_reach``). Tasks of
admin operations (exports) are filled here; the others need the user's key to read their payload,
so the stores fill them when they open (``storage.task_backfill``); a migration has no keys.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# models.rules.task_reach.APP_KINDS, as it stood when this revision was written.
_APP_KINDS = ("add", "add_structured", "batch_add_structured")


def upgrade() -> None:
    op.add_column("write_tasks", sa.Column("app_id", sa.String(128), nullable=True))
    op.add_column("write_tasks", sa.Column("reach", sa.String(16), nullable=True))
    tasks = sa.table("write_tasks", sa.column("kind", sa.String), sa.column("app_id"), sa.column("reach"))
    op.execute(tasks.update().where(tasks.c.kind.not_in(_APP_KINDS)).values(app_id="", reach="admin"))


def downgrade() -> None:
    op.drop_column("write_tasks", "reach")
    op.drop_column("write_tasks", "app_id")
