"""Running one recorded write task to its end (SPEC W1, W2): the task kinds and the failure policy.

Separate from ``write_path`` (accepting, queueing, retrying and resuming tasks): this is what one
turn of a task does on its user's mailbox, and how it ends DONE, FAILED or unfinished.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from pydantic import ValidationError

from engram.actors.memory_service import MemoryService
from engram.models.api import AddRequest, BatchAddStructuredRequest, Decision
from engram.models.domain import WriteTask
from engram.models.enums import TaskStatus
from engram.models.errors import EngramError, ErrorCode
from engram.models.metrics import METRICS

log = logging.getLogger(__name__)

KIND_ADD = "add"
KIND_ADD_STRUCTURED = "add_structured"
KIND_ADD_STRUCTURED_BATCH = "batch_add_structured"


class TaskRunner:
    """Starts a task (counting its attempt), runs it by kind and finishes it DONE or FAILED."""

    def __init__(
        self,
        service: MemoryService,
        handlers: Mapping[str, Callable[[WriteTask], Awaitable[None]]],
        max_attempts: int,
        spends_attempt: Callable[[str], bool],
    ) -> None:
        """``handlers``: the write path's registry of other layers' task kinds, read at each run;
        ``spends_attempt``: whether running a task now counts an attempt (not an in-process retry)."""
        self._service = service
        self._handlers = handlers
        self._max_attempts = max_attempts
        self._spends_attempt = spends_attempt

    async def run(self, task_id: str) -> bool:
        """Run the task; True when it is left unfinished by a passing failure (to retry)."""
        async with self._service.metadata.transaction() as tx:
            task = await tx.tasks.get(task_id)
            spend = self._spends_attempt(task_id)
            now = self._service.clock()
            attempts = await tx.tasks.start(task_id, now, spend_attempt=spend) if task else 0
        if task is None or attempts == 0:
            return False  # unknown, or already DONE / FAILED: a replay changes nothing
        if attempts > self._max_attempts:
            await self._fail(
                task, f"{ErrorCode.DEPENDENCY_UNAVAILABLE.value} gave up after {attempts - 1} attempts"
            )
            return False
        try:
            await self._execute(task)
            METRICS.task_ended(task.kind, TaskStatus.DONE, task.created_at, self._service.clock())
        except EngramError as exc:
            await self._fail(task, f"{exc.code.value} {exc.message}")
        except ValidationError:
            await self._fail(task, f"{ErrorCode.BAD_PARAMETER.value} the task's payload cannot be read")
        except Exception as exc:
            log.warning(
                "a %s task of user %s left unfinished (attempt %d): %s",
                task.kind,
                task.user_id,
                attempts,
                type(exc).__name__,
            )
            return not isinstance(exc, ConnectionAbortedError)
        return False

    async def _execute(self, task: WriteTask) -> None:
        if task.kind == KIND_ADD:
            request = AddRequest.model_validate(task.payload)
            await self._service.ingestor.process(request, task_id=task.task_id)
            return
        if task.kind == KIND_ADD_STRUCTURED_BATCH:
            batch = BatchAddStructuredRequest.model_validate(task.payload)
            # Replayed after a crash, the items already stored dedup to their memory ids.
            results = await self._service.add_structured_batch(batch.item_requests())
            decisions = [
                Decision(op="ADD", memory_id=r.memory_id, reason=KIND_ADD_STRUCTURED_BATCH)
                if r.code == 0
                else Decision(op="REFUSED", reason=f"{r.code} {r.msg}")
                for r in results
            ]
            async with self._service.metadata.transaction() as tx:
                await tx.tasks.finish(
                    task.task_id,
                    TaskStatus.DONE,
                    decisions=[d.model_dump(mode="json") for d in decisions],
                    error=None,
                    at=self._service.clock(),
                )
            return
        handler = self._handlers.get(task.kind)
        if handler is not None:
            await handler(task)
            return
        raise EngramError(ErrorCode.BAD_PARAMETER, f"unknown task kind {task.kind!r}")

    async def _fail(self, task: WriteTask, error: str) -> None:
        async with self._service.metadata.transaction() as tx:
            await tx.tasks.finish(
                task.task_id, TaskStatus.FAILED, decisions=None, error=error, at=self._service.clock()
            )
        METRICS.task_ended(task.kind, TaskStatus.FAILED, task.created_at, self._service.clock())
        log.info("a %s task of user %s failed: %s", task.kind, task.user_id, error.split(" ", 1)[0])
