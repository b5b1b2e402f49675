"""Group commit of accepted writes (#11): the tasks accepted while one commit runs go in the next.

An acknowledgement leaves only once its task's row is committed. Many concurrent accepts used to
mean as many write transactions queueing for SQLite's single write lock (and for the connection
pool); now one writer commits everything that arrived during the previous commit
(``actors.group_commit``). A group whose commit fails is retried one task at a time, so a bad
task fails alone and nothing is half-written; tasks are committed, and their callers resumed, in
arrival order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from engram.actors.group_commit import GroupCommit
from engram.models.domain import WriteTask


class TaskInserter(Protocol):
    """The part of the task repository the recorder uses."""

    async def insert_many(self, tasks: Sequence[WriteTask]) -> None:
        """Insert the task rows."""
        ...


class TaskTransaction(Protocol):
    """The part of a metadata transaction the recorder uses."""

    @property
    def tasks(self) -> TaskInserter:
        """The transaction's write tasks."""
        ...


Transaction = Callable[[], AbstractAsyncContextManager[TaskTransaction]]


class TaskRecorder(GroupCommit[WriteTask]):
    """Commits accepted tasks in groups; ``record`` returns once its task is durable.

    ``settled`` is what another writer awaits before taking SQLite's write lock, so that
    acknowledgements go first without starving it under a steady stream of them; ``waiting``
    says whether any acknowledgement is waiting now.
    """

    def __init__(self, transaction: Transaction, *, max_group: int = 256) -> None:
        self._transaction = transaction
        super().__init__(self._commit, what="tasks", max_group=max_group)

    async def record(self, task: WriteTask) -> None:
        """Commit ``task`` (with whatever else is waiting); raises what its own insert raised."""
        await self.submit(task)

    def stats(self) -> dict[str, int]:
        """Groups committed and tasks recorded (counts only)."""
        return {"groups": self.groups, "recorded": self.items}

    async def _commit(self, tasks: Sequence[WriteTask]) -> None:
        async with self._transaction() as tx:
            await tx.tasks.insert_many(tasks)
