"""The privacy operations of one user (SPEC P1, P2, C7): switches, list, purge, export, import.

Every method that changes a user runs on that user's mailbox (the caller submits it there), so it
never overlaps the user's other writes. Purge takes memories out of recall at once (status DELETED,
content wiped, vectors and archive objects removed, the user's version bumped); the lifecycle sweep
removes the rows after the deleted-retention period. A full purge also shreds the user's data key.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections import defaultdict
from datetime import datetime
from typing import Any, Protocol

from engram.actors.export_import import (
    Step,
    decode_vector,
    exported,
    is_profile_line,
    needs_embedding,
    parse_line,
    plan_import,
    profile_line,
    to_changes,
    to_memory,
)
from engram.actors.memory_service import MemoryService
from engram.actors.sensitive import held_line, screened_line
from engram.actors.views import memory_view
from engram.models.api import UserImportRequest, UserListRequest, UserPurgeRequest, UserSwitchRequest
from engram.models.bounds import in_range
from engram.models.domain import GLOBAL_APP, WriteTask
from engram.models.enums import OpSource, OpType, Status, TaskStatus
from engram.models.errors import EngramError, ErrorCode
from engram.models.hashing import content_hash
from engram.models.privacy import ImportResult, PurgeResult, SwitchState, UserListPage
from engram.models.rules import capacity
from engram.storage import privacy_queries as q
from engram.storage.export_files import (
    EXPORT_KIND,
    SealedLineWriter,
    export_path,
    export_root,
    read_plain,
    remove_exports,
)
from engram.storage.metadata import MetadataTx
from engram.storage.profiles import delete_profiles
from engram.storage.vectors import vector_record

log = logging.getLogger(__name__)

KIND_EXPORT = EXPORT_KIND
LISTED_BY_DEFAULT = (Status.ACTIVE, Status.SUPERSEDED, Status.ARCHIVED)
# Memories held for review (P5) are exported with their status; an import keeps them held.
EXPORTED_STATUSES = (*LISTED_BY_DEFAULT, Status.QUARANTINED)
INDEXED_STATUSES = (Status.ACTIVE, Status.SUPERSEDED)


class ArchiveObjects(Protocol):
    """The part of the cold archive a purge needs (lifecycle.archive.ColdArchive)."""

    async def delete(self, user_id: str, memory_ids: list[str]) -> None:
        """Remove these memories' archive objects."""

    async def memory_ids(self, user_id: str) -> set[str]:
        """Ids of every archived object of the user."""


# --- cursors (pure) -----------------------------------------------------------------------------


def encode_cursor(created_at: datetime, memory_id: str) -> str:
    """An opaque cursor for the position after this memory."""
    raw = json.dumps([created_at.isoformat(), memory_id]).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The position a cursor names; 40001 for anything ``encode_cursor`` did not make."""
    try:
        created_at, memory_id = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        position = (datetime.fromisoformat(created_at), str(memory_id))
    except (ValueError, TypeError, binascii.Error, UnicodeError):
        raise EngramError(
            ErrorCode.BAD_PARAMETER, "bad parameter: cursor is not one this service issued"
        ) from None
    # Out of range, the store's conversion to UTC would overflow (a forged cursor).
    if not in_range(position[0]) or len(position[1]) > 64:
        raise EngramError(ErrorCode.BAD_PARAMETER, "bad parameter: cursor is not one this service issued")
    return position


def exact_counters(active: dict[tuple[str, bool], int]) -> dict[str, int]:
    """Capacity counters (D3) computed from active-row counts by (app_id, is_important)."""
    exact: dict[str, int] = defaultdict(int)
    for (app_id, important), n in active.items():
        for dimension in capacity.dimensions_for(app_id):
            exact[dimension] += n
            if important:
                exact[capacity.important_dimension(dimension)] += n
    return dict(exact)


async def reset_counters(tx: MetadataTx, user_id: str) -> dict[str, int]:
    """Set the user's counters to the exact counts of their active rows; returns them."""
    exact = exact_counters(await tx.memories.count_active(user_id))
    existing = await tx.counters.read(user_id)
    await tx.counters.set(user_id, {**dict.fromkeys(existing, 0), **exact})
    return exact


class PrivacyService:
    """Switches, list, purge, export and import over one MemoryService's stores."""

    def __init__(self, service: MemoryService, archive: ArchiveObjects | None = None) -> None:
        self.service = service
        self.archive = archive
        settings = service.settings
        self.export_root = export_root(settings)

    # --- switches -----------------------------------------------------------------------------

    async def switches(self, user_id: str) -> dict[str, bool]:
        """The user's raw switch map ("" = global)."""
        async with self.service.metadata.transaction(readonly=True) as tx:
            return await q.get_switches(tx, user_id)

    async def switch_state(self, user_id: str) -> SwitchState:
        """The user's switches as the API shows them."""
        found = await self.switches(user_id)
        apps = {app: on for app, on in sorted(found.items()) if app != GLOBAL_APP}
        return SwitchState(user_id=user_id, enabled=found.get(GLOBAL_APP, True), apps=apps)

    async def set_switch(self, request: UserSwitchRequest) -> SwitchState:
        """Turn the user's memory (or one app's) on or off; memories are kept either way (P1, L4).

        Without ``enabled`` nothing changes: the answer is the switches as they are.
        """
        if request.enabled is None:
            return await self.switch_state(request.user_id)
        async with self.service.metadata.transaction() as tx:
            await q.set_switch(
                tx, request.user_id, request.app_id or GLOBAL_APP, request.enabled, self.service.clock()
            )
        return await self.switch_state(request.user_id)

    # --- list ---------------------------------------------------------------------------------

    async def list_memories(self, request: UserListRequest) -> UserListPage:
        """The user's memories of one dimension, oldest first, a page at a time (C7)."""
        after = decode_cursor(request.cursor) if request.cursor else None
        flt = q.MemoryFilter(
            user_id=request.user_id,
            app_id=request.app_id,
            level=request.level,
            mem_type=request.mem_type,
            statuses=(request.status,) if request.status else LISTED_BY_DEFAULT,
            session_id=request.session_id,
        )
        async with self.service.metadata.transaction(readonly=True) as tx:
            page = await q.memory_page(tx, flt, after=after, limit=request.limit)
        last = page[-1] if len(page) == request.limit else None
        return UserListPage(
            memories=[memory_view(m) for m in page],
            next_cursor=encode_cursor(last.created_at, last.memory_id) if last else None,
        )

    async def memory_apps(self, user_id: str, memory_ids: list[str]) -> dict[str, str]:
        """The app ("" = global) of each of the user's memories among ``memory_ids``."""
        async with self.service.metadata.transaction(readonly=True) as tx:
            return await q.memory_apps(tx, user_id, memory_ids)

    # --- purge --------------------------------------------------------------------------------

    async def purge(self, request: UserPurgeRequest) -> PurgeResult:
        """Out of recall at once; a full purge (no app, no level) also shreds the data key (P2)."""
        user_id = request.user_id
        now = self.service.clock()
        full = request.app_id is None and request.level is None
        scope = "all" if full else f"app={'set' if request.app_id else '-'} level={request.level or '-'}"
        async with self.service.metadata.transaction() as tx:
            rows = await q.purge_rows(tx, q.MemoryFilter(user_id, app_id=request.app_id, level=request.level))
            ids = [r.memory_id for r in rows]
            await q.mark_purged(tx, user_id, ids, now, f"purge: {scope}")
            exports = await q.task_ids(tx, user_id, KIND_EXPORT)
            # Every profile of the user may hold a purged fact: all go now, the next read or
            # refresh rebuilds what remains (L7).
            await delete_profiles(tx, user_id)
            shredded = False
            if full:
                await q.forget_tasks(tx, user_id, now)
                await q.drop_counters(tx, user_id)
                shredded = await tx.keys.shred(user_id)
            else:
                await reset_counters(tx, user_id)
                # No task keeps the text of what was purged (its request, its decisions: P8).
                await q.scrub_tasks(tx, user_id, ids, app_id=request.app_id, level=request.level, at=now)
            await tx.versions.bump(user_id)
        if full:
            await self.service.vectors.delete_user(user_id)
        elif ids:
            await self.service.vectors.delete(ids)
        if self.archive is not None:
            archived = sorted(await self.archive.memory_ids(user_id)) if full else ids
            if archived:
                await self.archive.delete(user_id, archived)
        # Export files hold the user's content (sealed): any purge makes them stale, so they go.
        remove_exports(self.export_root, exports)
        log.info("purged %d memories of user %s (full=%s)", len(ids), user_id, full)
        return PurgeResult(purged=len(ids), shredded=shredded)

    # --- export -------------------------------------------------------------------------------

    async def run_export(self, task: WriteTask) -> None:
        """Write the user's export file, one sealed line per memory, a page at a time (P2)."""
        user_id = task.user_id
        page_size = self.service.settings.privacy.export_page
        async with self.service.metadata.transaction() as tx:
            cipher = await tx.keys.cipher(user_id)
        writer = SealedLineWriter(export_path(self.export_root, task.task_id), cipher)
        try:
            after: tuple[datetime, str] | None = None
            flt = q.MemoryFilter(user_id, statuses=EXPORTED_STATUSES)
            while True:
                async with self.service.metadata.transaction(readonly=True) as tx:
                    page = await q.memory_page(tx, flt, after=after, limit=page_size)
                    changes = await q.changes_of(tx, user_id, [m.memory_id for m in page])
                vectors = await self.service.vectors.get_vectors([m.memory_id for m in page])
                by_memory: dict[str, list[Any]] = defaultdict(list)
                for change in changes:
                    by_memory[change.memory_id].append(change)
                for memory in page:
                    if memory.content is not None:
                        line = exported(memory, vectors.get(memory.memory_id), by_memory[memory.memory_id])
                        writer.write(line.model_dump_json())
                if len(page) < page_size:
                    break
                after = (page[-1].created_at, page[-1].memory_id)
            # The user's profiles (L7) follow the memories, one line each, refreshed first.
            for profile in await self.service.recaller.profiles.exported(user_id):
                writer.write(profile_line(profile))
            writer.commit()
        except BaseException:
            writer.abort()
            raise
        decision = {"op": "EXPORT", "memory_id": None, "content": None, "reason": f"{writer.lines} memories"}
        async with self.service.metadata.transaction() as tx:
            await tx.tasks.finish(
                task.task_id, TaskStatus.DONE, decisions=[decision], error=None, at=self.service.clock()
            )
        # Never the task id: it is the handle that reads the export (P9).
        log.info("export of user %s wrote %d lines", user_id, writer.lines)

    async def export_chunk(
        self, user_id: str, task_id: str, offset: int, max_bytes: int
    ) -> tuple[bytes, int | None]:
        """Plain JSON Lines of a finished export from ``offset``; 40401 unless it is this user's."""
        async with self.service.metadata.transaction(readonly=True) as tx:
            task = await tx.tasks.get(task_id)
            if task is None or task.user_id != user_id or task.kind != KIND_EXPORT:
                raise EngramError(ErrorCode.NOT_FOUND, f"no export {task_id} for this user")
            if task.status is not TaskStatus.DONE:
                raise EngramError(ErrorCode.NOT_FOUND, f"export {task_id} is {task.status.value}")
            cipher = await tx.keys.cipher(user_id)
        path = export_path(self.export_root, task_id)
        if not path.exists():
            raise EngramError(ErrorCode.NOT_FOUND, f"export {task_id} is gone")
        return read_plain(path, cipher, offset, max_bytes)

    # --- import -------------------------------------------------------------------------------

    async def import_lines(self, request: UserImportRequest) -> ImportResult:
        """Store exported lines for this user: skip or overwrite on id conflict, re-embed across models."""
        user_id = request.user_id
        # Profile lines are derived data: an import rebuilds the profile from the memories instead.
        lines = [(i + 1, text) for i, text in enumerate(request.lines) if not is_profile_line(text)]
        parsed = [parse_line(text, number) for number, text in lines]
        # Secrets and PII redacted before hashing and embedding (P5); a refused line is not stored.
        screened = [screened_line(item, self.service.settings.privacy.sensitive) for item in parsed]
        # An imported line that reads as an instruction to the agent is held for review (P5).
        items = [held_line(item) for item in screened if item is not None]
        embedder = self.service.embedder
        async with self.service.metadata.transaction(readonly=True) as tx:
            owners = await q.owners_of(tx, [item.memory_id for item in items])
        plan = [
            p for p in plan_import(items, owners, user_id, request.on_conflict) if p.step is not Step.SKIP
        ]
        # Only memories that go into the vector index need a vector (archived ones live in the archive).
        fresh = [
            p
            for p in plan
            if p.item.status in INDEXED_STATUSES
            and needs_embedding(p.item, embedder.model_name, embedder.dim)
        ]
        embedded = await embedder.embed([p.item.content for p in fresh]) if fresh else None
        new_vectors = {p.memory_id: embedded[i] for i, p in enumerate(fresh)} if embedded is not None else {}
        now = self.service.clock()
        records = []
        gone: list[str] = []
        async with self.service.metadata.transaction() as tx:
            cipher = await tx.keys.cipher(user_id)
            for planned in plan:
                item = planned.item
                memory = to_memory(
                    item,
                    user_id=user_id,
                    memory_id=planned.memory_id,
                    content_hash=content_hash(item.content, cipher.hash_key),
                )
                if planned.memory_id in new_vectors:
                    memory.embedding_model = embedder.model_name
                if planned.step is Step.OVERWRITE:
                    await tx.memories.save(memory)
                    await q.delete_changes(tx, user_id, [memory.memory_id])
                else:
                    await tx.memories.insert(memory)
                for change in to_changes(item, memory):
                    await q.insert_change(tx, change)
                op = OpType.UPDATE if planned.step is Step.OVERWRITE else OpType.ADD
                await tx.changes.add(memory, op, OpSource.ADMIN, "import", now)
                vector = new_vectors.get(memory.memory_id)
                if vector is None and item.vector is not None:
                    vector = decode_vector(item.vector, embedder.dim)
                if memory.status in INDEXED_STATUSES and vector is not None:
                    records.append(vector_record(memory, vector))
                else:
                    gone.append(memory.memory_id)
            counts = await reset_counters(tx, user_id)
            over = [d for d, n in counts.items() if n > capacity.limit_for(d, self.service.settings.capacity)]
            if over:
                raise EngramError(
                    ErrorCode.CAPACITY_FULL, f"import would pass the capacity of {', '.join(sorted(over))}"
                )
            await tx.versions.bump(user_id)
        if gone:
            await self.service.vectors.delete(gone)
        if records:
            await self.service.vectors.upsert(records)
        result = ImportResult(
            added=sum(p.step is Step.ADD for p in plan),
            overwritten=sum(p.step is Step.OVERWRITE for p in plan),
            skipped=len(items) - len(plan),
            refused=len(parsed) - len(items),
            reembedded=len(fresh),
        )
        log.info("import for user %s: %s", user_id, result.model_dump())
        return result
