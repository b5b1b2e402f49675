"""Finished write tasks keep no payload (P8): the raw request of every DONE or FAILED task is dropped.

From this revision on a task's payload is emptied when it finishes; this empties the payloads of
the tasks finished before it. No key is needed (the payload is replaced, not read), nothing a
running task needs is touched, and there is nothing to restore on downgrade.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    tasks = sa.table("write_tasks", sa.column("status", sa.String), sa.column("payload", sa.LargeBinary))
    op.execute(tasks.update().where(tasks.c.status.in_(["DONE", "FAILED"])).values(payload=b""))


def downgrade() -> None:
    """Nothing to undo: the dropped payloads are gone, and an empty payload is valid under 0007."""
