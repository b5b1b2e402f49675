"""Compression (L5): which memories form a group, and the deterministic merge of a group.

Pure functions over plain data. A group is memories of one user that share a key (app, level,
ownership, type: one capacity dimension), each with a decayed weight at most ``max_weight`` and a
cosine similarity of at least ``similarity`` to the group's most central member. Grouping is
deterministic (candidates in order of ``valid_at`` then id), so a replayed sweep picks the same
groups from the same rows.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from engram.models.api import MAX_CONTENT_CHARS
from engram.models.domain import Memory
from engram.models.enums import Level, MemType, Ownership, Status
from engram.models.settings import CompressionSettings

SUMMARY_SOURCE = "compression"
"""``source_type`` of a summary; summaries are never compressed again."""

GroupKey = tuple[str, Level, Ownership, MemType]
"""What the members of a group share: app (the capacity dimension), level, ownership and type."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory that may be compressed: its key, decayed weight, validity start and vector."""

    memory_id: str
    key: GroupKey
    weight: float
    valid_at: datetime
    vector: np.ndarray


def group_key(memory: Memory) -> GroupKey:
    """The key a memory groups under."""
    return (memory.app_id, memory.level, memory.ownership, memory.mem_type)


def eligible(
    memory: Memory, weight: float, settings: CompressionSettings, exempt_tags: Collection[str] = ()
) -> bool:
    """True when ``memory`` (decayed to ``weight``) may be merged into a summary.

    Only active, unmarked, non-expiring APP or GLOBAL memories with readable content qualify;
    session memories are valued at their session's close instead, and a decay-exempt tag (a
    persona) or an earlier summary keeps a memory as it is.
    """
    return (
        memory.status is Status.ACTIVE
        and memory.level is not Level.SESSION
        and not memory.is_important
        and memory.expire_at is None
        and memory.content is not None
        and memory.source_type != SUMMARY_SOURCE
        and not set(memory.custom_tags) & set(exempt_tags)
        and weight <= settings.max_weight
    )


def select_groups(candidates: Sequence[Candidate], settings: CompressionSettings) -> list[list[str]]:
    """The groups to compress, each a list of memory ids with its most central member first.

    Within one key, the candidate with the most similar unassigned neighbours leads a group of
    itself and those neighbours (the ``max_group`` most similar); leaders are taken while they have
    at least ``min_group`` members, so no memory is in two groups.
    """
    by_key: dict[GroupKey, list[Candidate]] = {}
    for candidate in sorted(candidates, key=lambda c: (c.valid_at, c.memory_id)):
        by_key.setdefault(candidate.key, []).append(candidate)
    groups: list[list[str]] = []
    for key in sorted(by_key, key=lambda k: (k[0], k[1].value, k[2].value, k[3].value)):
        groups.extend(_groups_of(by_key[key], settings))
    return groups


def _groups_of(members: Sequence[Candidate], settings: CompressionSettings) -> list[list[str]]:
    if len(members) < settings.min_group:
        return []
    matrix = np.stack([np.asarray(m.vector, dtype=np.float64) for m in members])
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms == 0, 1.0, norms)
    similar = matrix @ matrix.T
    close = similar >= settings.similarity
    free = np.ones(len(members), dtype=bool)
    groups: list[list[str]] = []
    while free.sum() >= settings.min_group:
        # Neighbours among the memories not yet in a group (each memory is its own neighbour).
        counts = (close & free[None, :]).sum(axis=1) * free
        leader = int(np.argmax(counts))  # the first of equals: the oldest, a stable choice
        if counts[leader] < settings.min_group:
            break
        near = [int(i) for i in np.flatnonzero(close[leader] & free) if int(i) != leader]
        near.sort(key=lambda i: (-float(similar[leader, i]), i))
        chosen = [leader, *near[: settings.max_group - 1]]
        free[chosen] = False
        groups.append([members[i].memory_id for i in chosen])
    return groups


_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
_WEEKDAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
_EN_DATE = (
    rf"\d{{4}}-\d{{1,2}}-\d{{1,2}}(?:[T ]\d{{1,2}}:\d{{2}}(?::\d{{2}})?)?"
    rf"|\d{{4}}/\d{{1,2}}/\d{{1,2}}|\d{{1,2}}/\d{{1,2}}/\d{{2,4}}"
    rf"|(?:(?:{_WEEKDAYS}),?\s+)?(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
    rf"|(?:(?:{_WEEKDAYS}),?\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\.?(?:,?\s+\d{{4}})?"
    rf"|(?:{_WEEKDAYS})|today|yesterday|last\s+night"
)
_EN_DATES = re.compile(rf"(?:\b(?:on|in|at|during)\s+)?\b(?:{_EN_DATE})\b", re.IGNORECASE)
_ZH_DATES = re.compile(
    r"(?:在|于)?(?:\d{4}年\d{1,2}月\d{1,2}[日号]|\d{1,2}月\d{1,2}[日号]|\d{4}年\d{1,2}月"
    r"|(?:星期|周|礼拜)[一二三四五六日天]|今天|昨天|前天)"
)
_CJK = re.compile(r"[\u3400-\u9fff]")
_TRIM = " \t,，;；:：-–—.。!！"


def without_dates(content: str) -> str:
    """``content`` with its dates and weekdays (and the preposition before them) taken out."""
    text = _ZH_DATES.sub("", _EN_DATES.sub("", content))
    text = re.sub(r"\s+([,.;:!?])", r"\1", re.sub(r"\s{2,}", " ", text))
    return text.strip(_TRIM)


def merged_statement(contents: Sequence[str], dates: Sequence[datetime]) -> str:
    """The rules engine's summary of a group: its common statement, how many times, and when.

    The common statement is the most frequent content once dates are taken out (ties: the
    earliest in ``contents``, whose first is the group's most central member), e.g. "Ordered coffee
    at the station cafe (regularly: 30 times from 2026-01-01 to 2026-01-30)".
    """
    if not contents:
        raise ValueError("a summary needs at least one memory")
    stripped = [without_dates(c) or c.strip(_TRIM) for c in contents]
    tally = Counter(" ".join(s.casefold().split()) for s in stripped)
    best = max(range(len(stripped)), key=lambda i: (tally[" ".join(stripped[i].casefold().split())], -i))
    statement = stripped[best] or contents[0]
    first, last = min(dates), max(dates)
    n = len(contents)
    if _CJK.search(statement):
        when = f"{first:%Y-%m-%d}" if first.date() == last.date() else f"{first:%Y-%m-%d} 至 {last:%Y-%m-%d}"
        span = f"（经常：共 {n} 次，{when}）"
    else:
        when = (
            f"on {first:%Y-%m-%d}"
            if first.date() == last.date()
            else f"from {first:%Y-%m-%d} to {last:%Y-%m-%d}"
        )
        span = f" (regularly: {n} times {when})"
    return statement[: MAX_CONTENT_CHARS - len(span)] + span
