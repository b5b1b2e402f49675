"""Compression (L5): a group of similar, low-weight memories becomes one summary memory.

The groups come from ``models.rules.compression`` (pure); this module does the I/O, one group at a
time, and must run on the user's mailbox (the sweep and the session close already do). Crash
ordering follows DESIGN decision 3, so an interruption at any step leaves either the originals or
the summary current, never both or neither:

1. the summary text (engine or deterministic merge) and its vector, outside any transaction;
2. the originals' archive objects (a crash here leaves spare objects: reconcile removes them);
3. ONE metadata transaction: the originals ARCHIVED with ``superseded_by`` = the summary (only if
   every one is still ACTIVE), the summary inserted, a COMPRESS entry on each, counters, version;
4. the summary's vector upserted, then the originals' vectors deleted (a crash before either
   leaves a missing or an orphan vector: reconcile re-embeds or removes it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime

import numpy as np

from engram.lifecycle.archive import ArchivedItem
from engram.lifecycle.context import LifecycleStores, vectors_for
from engram.lifecycle.plan import SweepCounts
from engram.models.domain import Memory
from engram.models.enums import MemType, OpSource, OpType
from engram.models.hashing import content_hash
from engram.models.metrics import METRICS
from engram.models.rules.capacity import counter_deltas
from engram.models.rules.compression import (
    SUMMARY_SOURCE,
    Candidate,
    eligible,
    group_key,
    merged_statement,
    select_groups,
)
from engram.models.rules.decay import weight_now
from engram.models.rules.records import new_memory
from engram.storage.compressed import archive_into
from engram.storage.crypto import ContentCipher
from engram.storage.vectors import vector_record

log = logging.getLogger(__name__)

Step = Callable[[str], Awaitable[None]]
"""Called after each step of a group's compression with the step's name (tests inject faults)."""

# Labels the summary carries over from its originals (union), at most this many of each.
_MAX_LABELS = 32


class _ChangedError(Exception):
    """An original was no longer active when the transaction re-checked it: the group is undone."""


class Compressor:
    """Compresses one user's groups; ``on_step`` observes (or interrupts) each step."""

    def __init__(self, stores: LifecycleStores, *, on_step: Step | None = None) -> None:
        self.stores = stores
        self._on_step = on_step

    async def compress_user(
        self,
        user_id: str,
        now: datetime,
        *,
        app_ids: Collection[str] | None = None,
        dry_run: bool = False,
    ) -> SweepCounts:
        """Compress the user's groups (only in ``app_ids``' dimensions when given) as of ``now``."""
        stores = self.stores
        config = stores.settings.lifecycle.compression
        async with stores.metadata.transaction(readonly=True) as tx:
            cipher = await tx.keys.existing(user_id)
            if cipher is None:  # never a new key; a shredded user has nothing to compress
                return SweepCounts()
            # Weights first, without content: most days most users have too few faded memories,
            # and decrypting every active row to learn that cost ~0.2 ms a memory.
            light = [
                r.memory_id
                for r in await tx.memories.eviction_rows(user_id, None)
                if not r.is_important and weight_now(r, now, stores.settings.decay) <= config.max_weight
            ]
            if len(light) < config.min_group:
                return SweepCounts()
            active = list((await tx.memories.get_many(user_id, light)).values())
        exempt = stores.settings.decay.exempt_tags
        pool = [
            m
            for m in active
            if (app_ids is None or m.app_id in app_ids)
            and eligible(m, weight_now(m, now, stores.settings.decay), config, exempt)
        ]
        if len(pool) < config.min_group:
            return SweepCounts()
        vectors = await vectors_for(stores, pool)
        candidates = [
            Candidate(m.memory_id, group_key(m), weight_now(m, now, stores.settings.decay), m.valid_at, v)
            for m in pool
            if (v := vectors.get(m.memory_id)) is not None and np.shape(v) == (stores.embedder.dim,)
        ]
        groups = select_groups(candidates, config)
        if dry_run:
            return SweepCounts(
                compression_summaries=len(groups), compressed_memories=sum(len(g) for g in groups)
            )
        by_id = {m.memory_id: m for m in pool}
        done = SweepCounts()
        for group in groups:
            members = [by_id[i] for i in group]
            if await self._compress(cipher, members, vectors, now):
                done.compression_summaries += 1
                done.compressed_memories += len(members)
        METRICS.counts(
            METRICS.sweep_actions,
            "action",
            {
                "compression_summaries": done.compression_summaries,
                "compressed_memories": done.compressed_memories,
            },
        )
        return done

    async def _compress(
        self, cipher: ContentCipher, group: Sequence[Memory], vectors: dict[str, np.ndarray], now: datetime
    ) -> bool:
        stores = self.stores
        user_id = group[0].user_id
        text = await self._summary_text(group)
        summary = self._summary(cipher, group, text, now)
        [vector] = await stores.embedder.embed([text])
        await self._step("summarized")
        for memory in group:
            item = ArchivedItem(memory.memory_id, memory.content or "", vectors[memory.memory_id])
            await stores.archive.put(cipher, user_id, item)
        await self._step("objects_written")
        ids = [m.memory_id for m in group]
        try:
            async with stores.metadata.transaction() as tx:
                if await archive_into(tx, user_id, ids, summary.memory_id, now) != len(ids):
                    raise _ChangedError
                await self._step("originals_archived")
                await tx.memories.insert(summary)
                await self._step("summary_inserted")
                await tx.changes.add(
                    summary,
                    OpType.COMPRESS,
                    OpSource.SYSTEM,
                    f"compression: summary of {len(ids)} memories",
                    now,
                    content_after=summary.content,
                )
                into = f"compression: into {summary.memory_id}"
                for memory in group:
                    await tx.changes.add(memory, OpType.COMPRESS, OpSource.SYSTEM, into, now)
                deltas = counter_deltas(list(group), -1)
                deltas.update(counter_deltas([summary], +1))  # update adds counts
                await tx.counters.add(user_id, deltas)
                await tx.versions.bump(user_id)
                await self._step("logged")
        except _ChangedError:
            # Nothing was committed; the spare archive objects of still-active memories are
            # reconcile's to remove (one may belong to a memory archived meanwhile).
            log.info("compression of a group of user %s skipped: its memories changed", user_id)
            return False
        await self._step("committed")
        await stores.vectors.upsert([vector_record(summary, vector)])
        await self._step("summary_indexed")
        await stores.vectors.delete(ids)
        await self._step("originals_unindexed")
        return True

    async def _summary_text(self, group: Sequence[Memory]) -> str:
        summarize = self.stores.summarize
        if summarize is not None:
            text = await summarize(group)
            if text and text.strip():
                return text.strip()
        return merged_statement([m.content or "" for m in group], [m.valid_at for m in group])

    def _summary(self, cipher: ContentCipher, group: Sequence[Memory], text: str, now: datetime) -> Memory:
        stores = self.stores
        first = group[0]
        summary = new_memory(
            stores.settings.weights,
            user_id=first.user_id,
            app_id=first.app_id,
            level=first.level,
            session_id=None,
            ownership=first.ownership,
            # A pattern over many events is a fact about the user (seed: 20 orders -> "often orders").
            mem_type=MemType.SEMANTIC,
            content=text,
            content_hash=content_hash(text, cipher.hash_key),
            embedding_model=stores.embedder.model_name,
            now=now,
            valid_at=min(m.valid_at for m in group),
            custom_tags=_union([m.custom_tags for m in group]),
            entities=_union([m.entities for m in group]),
            source_type=SUMMARY_SOURCE,
        )
        summary.recall_count = sum(m.recall_count for m in group)
        recalled = [m.last_recalled_at for m in group if m.last_recalled_at is not None]
        summary.last_recalled_at = max(recalled) if recalled else None
        return summary

    async def _step(self, name: str) -> None:
        if self._on_step is not None:
            await self._on_step(name)


def _union(lists: Sequence[Sequence[str]]) -> list[str]:
    seen: dict[str, None] = {}
    for labels in lists:
        for label in labels:
            seen.setdefault(label, None)
    return list(seen)[:_MAX_LABELS]
