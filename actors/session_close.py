"""``session/close`` (SPEC L6, C8): value the session's memories, promote the valuable, drop the rest.

Valuation (``actors.session_value``) is the engine layer's: important, recalled and ``must_promote``
memories always go up, and an LLM engine may choose more; it runs before the write transaction, so
a slow engine never holds the database's write lock.

Promotion moves a memory from SESSION to APP (when the session has an app) or GLOBAL level; when
that moves it to another capacity dimension it is admitted there like a new memory (capacity
check, eviction, W8), and a refusal drops it instead. A "to be continued" session keeps one
continuity memory at SESSION level that expires after ``lifecycle.continuity_ttl_hours``; the
sweep archives it once expired. Runs on the user's mailbox (the caller submits it there). A close
that promoted memories then compresses (L5) the dimensions they moved to, when given ``compress``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import replace
from datetime import timedelta

from engram.actors import statements
from engram.actors.memory_service import MemoryService
from engram.actors.session_value import EngineValuer, Valuer, deterministic_value
from engram.models.api import MAX_CONTENT_CHARS, SessionCloseRequest, SessionCloseResult
from engram.models.domain import GLOBAL_APP, Memory
from engram.models.enums import Level, MemType, OpSource, OpType, Ownership, Status
from engram.models.errors import EngramError, ErrorCode
from engram.models.hashing import content_hash
from engram.models.rules import capacity
from engram.models.rules.capacity import counter_deltas
from engram.models.rules.records import new_memory
from engram.storage.admission import admit, make_room
from engram.storage.metadata import MetadataTx
from engram.storage.vectors import VectorRecord, vector_record

log = logging.getLogger(__name__)

CONTINUITY_TAG = "continuity"


def session_memories(memories: Sequence[Memory], request: SessionCloseRequest) -> list[Memory]:
    """The active SESSION memories of the request's session (and of its app, when one is named);
    those without an app only when the request includes the user's global memories (P4)."""
    return [
        m
        for m in memories
        if m.status is Status.ACTIVE
        and m.level is Level.SESSION
        and m.session_id == request.session_id
        and (request.app_id is None or m.app_id == request.app_id or m.app_id == GLOBAL_APP)
        and (m.app_id != GLOBAL_APP or request.include_global)
    ]


def promotion_target(memory: Memory, request: SessionCloseRequest) -> tuple[Level, str]:
    """Where a promoted memory goes: its session's app (APP level), else GLOBAL."""
    app_id = request.app_id or memory.app_id
    return (Level.APP, app_id) if app_id else (Level.GLOBAL, GLOBAL_APP)


def continuity_content(session_id: str, memories: Sequence[Memory]) -> str:
    """The text of a continuity memory: what the unfinished session held, within the content limit."""
    text = f"Unfinished session {session_id}: " + "; ".join(m.content or "" for m in memories)
    return text[:MAX_CONTENT_CHARS]


Compress = Callable[[str, Collection[str]], Awaitable[object]]
"""Compresses a user's similar low-weight memories in these apps' dimensions (L5; the lifecycle's)."""


class SessionCloser:
    """Closes sessions over a MemoryService's stores.

    ``valuer`` defaults to the service's engine (``EngineValuer``) within the evolution LLM timeout.
    ``compress`` (the lifecycle's compression, wired by the serve layer) runs after a close that
    promoted memories, over the dimensions they moved to (``lifecycle.compression.at_session_close``).
    """

    def __init__(
        self, service: MemoryService, valuer: Valuer | None = None, compress: Compress | None = None
    ) -> None:
        self.service = service
        self.valuer: Valuer = valuer or EngineValuer(service.ingestor.engine, service.settings.evolution)
        self.compress = compress

    async def close(self, request: SessionCloseRequest) -> SessionCloseResult:
        """Promote, drop and (when continued) leave a continuity memory; vectors follow the commit."""
        service = self.service
        promoted: list[Memory] = []
        refused: list[str] = []
        evicted: list[str] = []
        continuity: Memory | None = None
        async with service.metadata.transaction(readonly=True) as tx:
            valued = session_memories(
                await tx.memories.with_status(request.user_id, [Status.ACTIVE]), request
            )
        # Outside the write transaction: an engine may take seconds, and SQLite has one write lock.
        chosen = await self.valuer(valued, request.must_promote) if valued else set()
        async with service.metadata.transaction() as tx:
            session = session_memories(
                await tx.memories.with_status(request.user_id, [Status.ACTIVE]), request
            )
            # The close runs on the user's mailbox, so the session should not have changed since; a
            # memory that appeared meanwhile is judged by the deterministic rule alone.
            known = {m.memory_id for m in valued}
            chosen |= deterministic_value(
                [m for m in session if m.memory_id not in known], request.must_promote
            )
            for memory in session:
                if memory.memory_id not in chosen:
                    continue
                moved = await self._promote(tx, memory, request, evicted)
                if moved is None:
                    refused.append(memory.memory_id)
                else:
                    promoted.append(moved)
            done = {m.memory_id for m in promoted} | set(evicted)
            dropped = [m for m in session if m.memory_id not in done]
            await self._drop(tx, dropped, refused)
            if request.to_be_continued and session:
                continuity = await self._continuity(tx, request, session, evicted)
            if session or continuity is not None:
                await tx.versions.bump(request.user_id)
        await self._follow_vectors(promoted, [m.memory_id for m in dropped] + evicted, continuity)
        await self._compress(request.user_id, promoted)
        return SessionCloseResult(
            promoted=[m.memory_id for m in promoted],
            dropped=[m.memory_id for m in dropped],
            capacity_refused=refused,
            continuity_memory_id=continuity.memory_id if continuity else None,
        )

    async def _compress(self, user_id: str, promoted: Sequence[Memory]) -> None:
        config = self.service.settings.lifecycle.compression
        if self.compress is None or not promoted or not (config.enabled and config.at_session_close):
            return
        try:
            await self.compress(user_id, {m.app_id for m in promoted})
        except Exception as exc:  # the close itself committed; the next sweep compresses instead
            log.warning("compression after a session close failed: %s", type(exc).__name__)

    async def _promote(
        self, tx: MetadataTx, memory: Memory, request: SessionCloseRequest, evicted: list[str]
    ) -> Memory | None:
        settings, now = self.service.settings, self.service.clock()
        level, app_id = promotion_target(memory, request)
        moved = replace(memory, level=level, app_id=app_id, session_id=None, updated_at=now)
        if capacity.dimension_for(app_id) != capacity.dimension_for(memory.app_id):
            # It leaves its old dimension and is admitted to the new one like a new memory.
            await tx.counters.add(memory.user_id, counter_deltas([memory], -1))
            try:
                evicted.extend(await make_room(tx, settings, moved, now))
            except EngramError as exc:
                if exc.code not in (ErrorCode.CAPACITY_FULL, ErrorCode.IMPORTANT_LIMIT_EXCEEDED):
                    raise
                await tx.counters.add(memory.user_id, counter_deltas([memory], +1))
                return None
            await tx.counters.add(memory.user_id, counter_deltas([moved], +1))
        await tx.memories.save(moved)
        await tx.changes.add(
            moved, OpType.UPDATE, OpSource.SYSTEM, f"session close: promoted to {level.value}", now
        )
        return moved

    async def _drop(self, tx: MetadataTx, dropped: Sequence[Memory], refused: Collection[str]) -> None:
        if not dropped:
            return
        now = self.service.clock()
        user_id = dropped[0].user_id
        await tx.memories.mark_status(user_id, [m.memory_id for m in dropped], Status.DELETED, now)
        for memory in dropped:
            reason = (
                "session close: capacity full" if memory.memory_id in refused else "session close: dropped"
            )
            await tx.changes.add(
                memory, OpType.DELETE, OpSource.SYSTEM, reason, now, content_before=memory.content
            )
        await tx.counters.add(user_id, counter_deltas(list(dropped), -1))

    async def _continuity(
        self, tx: MetadataTx, request: SessionCloseRequest, session: Sequence[Memory], evicted: list[str]
    ) -> Memory | None:
        service = self.service
        now = service.clock()
        content = continuity_content(request.session_id, session)
        cipher = await tx.keys.cipher(request.user_id)
        memory = new_memory(
            service.settings.weights,
            user_id=request.user_id,
            app_id=request.app_id or GLOBAL_APP,
            level=Level.SESSION,
            session_id=request.session_id,
            ownership=Ownership.AGENT,
            mem_type=MemType.EPISODIC,
            content=content,
            content_hash=content_hash(content, cipher.hash_key),
            embedding_model=service.embedder.model_name,
            now=now,
            expire_at=now + timedelta(hours=service.settings.lifecycle.continuity_ttl_hours),
            custom_tags=[CONTINUITY_TAG],
            entities=statements.entities(content),
            source_type="session_close",
        )
        try:
            evicted.extend(
                await admit(tx, service.settings, memory, OpSource.SYSTEM, "session close: continuity", now)
            )
        except EngramError as exc:
            if exc.code is not ErrorCode.CAPACITY_FULL:
                raise
            return None
        return memory

    async def _follow_vectors(
        self, promoted: list[Memory], removed: list[str], continuity: Memory | None
    ) -> None:
        vectors = self.service.vectors
        if removed:
            await vectors.delete(removed)
        records: list[VectorRecord] = []
        if promoted:
            stored = await vectors.get_vectors([m.memory_id for m in promoted])
            missing = [m for m in promoted if m.memory_id not in stored]
            if missing:
                fresh = await self.service.embedder.embed([m.content or "" for m in missing])
                stored.update({m.memory_id: fresh[i] for i, m in enumerate(missing)})
            # Same vector, new level and app: the index's scope fields must follow the metadata.
            records.extend(vector_record(m, stored[m.memory_id]) for m in promoted)
        if continuity is not None and continuity.content is not None:
            [vector] = await self.service.embedder.embed([continuity.content])
            records.append(vector_record(continuity, vector))
        if records:
            await vectors.upsert(records)
