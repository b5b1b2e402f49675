"""Write tasks (W1, W2): recorded sealed on acceptance, started, finished, listed for resumption."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, case, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from engram.models.domain import WriteTask
from engram.models.enums import TaskStatus
from engram.models.rules.task_reach import REACH_ADMIN, TaskOwner, task_reach
from engram.storage.repositories.keys import UserKeys
from engram.storage.repositories.rows import keyset_after, task_from_row
from engram.storage.schema import write_tasks

_UNFINISHED = (TaskStatus.PENDING.value, TaskStatus.RUNNING.value)


@dataclass(frozen=True)
class TaskOutcome:
    """How one task ends (``TaskRepository.finish_many``)."""

    task_id: str
    user_id: str
    status: TaskStatus
    decisions: list[dict[str, Any]] | None
    error: str | None


@dataclass(frozen=True)
class UnfinishedRef:
    """An unfinished task as a rescan needs it: which, whose, what kind; no payload to decrypt."""

    task_id: str
    user_id: str
    kind: str
    created_at: datetime


class TaskRepository:
    """The ``write_tasks`` table within one transaction."""

    def __init__(self, conn: AsyncConnection, keys: UserKeys) -> None:
        self.conn = conn
        self._keys = keys

    async def insert(self, task: WriteTask) -> None:
        """Record an accepted write; its payload and decisions are encrypted like content."""
        await self.insert_many([task])

    async def insert_many(self, tasks: Sequence[WriteTask]) -> None:
        """Record accepted writes in one statement (a group commit), encrypted like content."""
        if not tasks:
            return
        await self._keys.prefetch(task.user_id for task in tasks)
        rows = []
        for task in tasks:
            cipher = await self._keys.cipher(task.user_id)
            app_id, reach = task_reach(task.kind, task.payload)
            rows.append(
                {
                    "task_id": task.task_id,
                    "app_id": app_id,
                    "reach": reach,
                    "user_id": task.user_id,
                    "kind": task.kind,
                    "status": task.status.value,
                    "payload": cipher.encrypt(json.dumps(task.payload)),
                    "result": cipher.encrypt(json.dumps(task.decisions)) if task.decisions else None,
                    "error": task.error,
                    "attempts": task.attempts,
                    "created_at": task.created_at,
                    "updated_at": task.updated_at,
                }
            )
        await self.conn.execute(write_tasks.insert(), rows)

    async def get(self, task_id: str, *, with_payload: bool = True) -> WriteTask | None:
        """One task with its payload and decisions decrypted, or None when unknown.

        ``with_payload=False`` leaves the payload out (empty) and unread: a status poll of a batch
        of 1,000 items then decrypts and parses only the decisions.
        """
        columns = [c for c in write_tasks.c if with_payload or c.name != "payload"]
        row = (
            (await self.conn.execute(select(*columns).where(write_tasks.c.task_id == task_id)))
            .mappings()
            .one_or_none()
        )
        if row is None:
            return None
        return task_from_row(row, await self._keys.existing(row["user_id"]))

    async def get_many(self, task_ids: Sequence[str]) -> dict[str, WriteTask]:
        """Several tasks by id (unknown ids are absent), decrypted, in one query."""
        if not task_ids:
            return {}
        rows = (
            (await self.conn.execute(select(write_tasks).where(write_tasks.c.task_id.in_(list(task_ids)))))
            .mappings()
            .all()
        )
        await self._keys.prefetch_existing(row["user_id"] for row in rows)
        return {row["task_id"]: task_from_row(row, await self._keys.existing(row["user_id"])) for row in rows}

    async def owner(self, task_id: str) -> TaskOwner | None:
        """Whose the task is and who may read it (tenancy, P9), without decrypting anything."""
        columns = (write_tasks.c.user_id, write_tasks.c.kind, write_tasks.c.app_id, write_tasks.c.reach)
        row = (
            await self.conn.execute(select(*columns).where(write_tasks.c.task_id == task_id))
        ).one_or_none()
        if row is None:
            return None
        user_id, kind, app_id, reach = row
        # Not filled yet (a row from before migration 0008 the backfill has not reached): admin only.
        return TaskOwner(user_id, kind, app_id or "", reach or REACH_ADMIN)

    async def start(self, task_id: str, at: datetime, *, spend_attempt: bool = True) -> int:
        """Mark an unfinished task RUNNING and count the attempt; returns its attempts (0: none such).

        ``spend_attempt=False``: an in-process retry after a passing failure. Attempts count the
        starts a process may have died in (the crash-loop guard); that start was counted already.
        """
        return (await self.start_many([task_id], at, spending=[task_id] if spend_attempt else []))[task_id]

    async def start_many(
        self, task_ids: Sequence[str], at: datetime, *, spending: Collection[str] | None = None
    ) -> dict[str, int]:
        """``start`` for several tasks: each id's attempts (0: none such). ``spending``: the ids that
        count an attempt (default: all; the others are in-process retries)."""
        if not task_ids:
            return {}
        ids = list(task_ids)
        counted = ids if spending is None else [tid for tid in ids if tid in spending]
        retried = [tid for tid in ids if tid not in counted]
        # A retry whose first start never committed (the store refused it) counts that one start.
        at_least_one = case((write_tasks.c.attempts < 1, 1), else_=write_tasks.c.attempts)
        for group, attempts in ((counted, write_tasks.c.attempts + 1), (retried, at_least_one)):
            if group:
                await self.conn.execute(
                    update(write_tasks)
                    .where(and_(write_tasks.c.task_id.in_(group), write_tasks.c.status.in_(_UNFINISHED)))
                    .values(status=TaskStatus.RUNNING.value, attempts=attempts, updated_at=at)
                )
        query = select(write_tasks.c.task_id, write_tasks.c.attempts, write_tasks.c.status).where(
            write_tasks.c.task_id.in_(ids)
        )
        found = {
            tid: int(n) if status == TaskStatus.RUNNING.value else 0
            for tid, n, status in (await self.conn.execute(query)).all()
        }
        return {tid: found.get(tid, 0) for tid in ids}

    async def unfinished_among(self, task_ids: Sequence[str]) -> set[str]:
        """Which of these tasks are still unfinished (locked until the commit where that exists)."""
        if not task_ids:
            return set()
        query = (
            select(write_tasks.c.task_id)
            .where(and_(write_tasks.c.task_id.in_(list(task_ids)), write_tasks.c.status.in_(_UNFINISHED)))
            .with_for_update()
        )
        return {row[0] for row in (await self.conn.execute(query)).all()}

    async def finish(
        self,
        task_id: str,
        status: TaskStatus,
        *,
        decisions: list[dict[str, Any]] | None,
        error: str | None,
        at: datetime,
    ) -> bool:
        """Move an unfinished task to DONE or FAILED; False when it was unknown or already finished.

        The condition on the current status is what makes a second, concurrent finisher (another
        process replaying the same task) see False and roll its work back.
        """
        if status not in (TaskStatus.DONE, TaskStatus.FAILED):
            raise ValueError(f"finish_task ends a task as DONE or FAILED, not {status}")
        owner = (
            await self.conn.execute(select(write_tasks.c.user_id).where(write_tasks.c.task_id == task_id))
        ).scalar_one_or_none()
        if owner is None:
            return False
        cipher = await self._keys.cipher(owner)
        result = await self.conn.execute(
            update(write_tasks)
            .where(and_(write_tasks.c.task_id == task_id, write_tasks.c.status.in_(_UNFINISHED)))
            .values(
                status=status.value,
                payload=b"",  # a finished task keeps no payload (P8)
                result=None if decisions is None else cipher.encrypt(json.dumps(decisions)),
                error=error,
                updated_at=at,
            )
        )
        return bool(result.rowcount)

    async def finish_many(self, outcomes: Sequence[TaskOutcome], at: datetime) -> None:
        """``finish_task`` for several unfinished tasks in one statement (check them first with
        ``unfinished_among``: the count of rows an executemany changed is not reported everywhere)."""
        if not outcomes:
            return
        await self._keys.prefetch(outcome.user_id for outcome in outcomes)
        values = []
        for outcome in outcomes:
            cipher = await self._keys.cipher(outcome.user_id)
            result = None if outcome.decisions is None else cipher.encrypt(json.dumps(outcome.decisions))
            values.append(
                {
                    "tid": outcome.task_id,
                    "new_status": outcome.status.value,
                    "res": result,
                    "err": outcome.error,
                }
            )
        statement = (
            update(write_tasks)
            # No IN (...) here: an expanding list cannot be used with executemany.
            .where(
                and_(
                    write_tasks.c.task_id == bindparam("tid"),
                    or_(*(write_tasks.c.status == status for status in _UNFINISHED)),
                )
            )
            # A finished task keeps no payload (P8): the request was only needed to replay it.
            .values(
                status=bindparam("new_status"),
                payload=b"",
                result=bindparam("res"),
                error=bindparam("err"),
                updated_at=at,
            )
        )
        await self.conn.execute(statement, values)

    async def unfinished_refs(
        self, before: datetime, limit: int = 1000, *, after: tuple[datetime, str] | None = None
    ) -> list[UnfinishedRef]:
        """PENDING or RUNNING tasks created before ``before``, oldest first, without their payloads;
        ``after`` (created_at, task_id) pages on."""
        conditions: list[ColumnElement[bool]] = [
            write_tasks.c.status.in_(_UNFINISHED),
            write_tasks.c.created_at < before,
        ]
        if after is not None:
            conditions.append(keyset_after(write_tasks.c.created_at, write_tasks.c.task_id, after))
        columns = (write_tasks.c.task_id, write_tasks.c.user_id, write_tasks.c.kind, write_tasks.c.created_at)
        query = (
            select(*columns)
            .where(and_(*conditions))
            .order_by(write_tasks.c.created_at, write_tasks.c.task_id)
            .limit(limit)
        )
        rows = (await self.conn.execute(query)).all()
        return [UnfinishedRef(row[0], row[1], row[2], row[3]) for row in rows]

    async def unfinished(
        self, limit: int = 1000, *, after: tuple[datetime, str] | None = None
    ) -> list[WriteTask]:
        """PENDING or RUNNING tasks, oldest first; ``after`` (created_at, task_id) pages on."""
        conditions: list[ColumnElement[bool]] = [write_tasks.c.status.in_(_UNFINISHED)]
        if after is not None:
            conditions.append(keyset_after(write_tasks.c.created_at, write_tasks.c.task_id, after))
        query = (
            select(write_tasks)
            .where(and_(*conditions))
            .order_by(write_tasks.c.created_at, write_tasks.c.task_id)
            .limit(limit)
        )
        rows = (await self.conn.execute(query)).mappings().all()
        return [task_from_row(row, await self._keys.existing(row["user_id"])) for row in rows]
