"""Memory weights: initial values (W7), lazy exponential decay (L1, R3) and recall recovery (R4)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol

from engram.models.domain import Memory
from engram.models.enums import MemType, Ownership
from engram.models.settings import DecaySettings, InitialWeights

SECONDS_PER_DAY = 86_400.0


def initial_weight(
    weights: InitialWeights,
    ownership: Ownership,
    mem_type: MemType,
    *,
    is_important: bool = False,
    time_bound: bool = False,
) -> float:
    """Initial weight of a new memory (W7): by type, raised for time-bound events and important marks."""
    weight = weights.for_type(ownership, mem_type)
    if time_bound:
        weight = max(weight, weights.time_bound)
    if is_important:
        weight = max(weight, weights.important)
    return weight


def is_decay_exempt(custom_tags: Iterable[str], settings: DecaySettings) -> bool:
    """True when a tag marks the memory as exempt from decay (persona memories, W6)."""
    exempt = {tag.casefold() for tag in settings.exempt_tags}
    return any(tag.casefold() in exempt for tag in custom_tags)


def decayed_weight(
    weight: float,
    weight_at: datetime,
    now: datetime,
    *,
    is_important: bool,
    exempt: bool,
    settings: DecaySettings,
) -> float:
    """The weight ``weight`` (as of ``weight_at``) decayed to ``now``: w * exp(-lambda * alpha * days).

    Decay is memoryless, so catching up in one step equals applying it in many (lazy decay, R3).
    """
    days = (now - weight_at).total_seconds() / SECONDS_PER_DAY
    if exempt or days <= 0:
        return weight
    alpha = settings.important_alpha if is_important else 1.0
    return weight * math.exp(-settings.lambda_per_day * alpha * days)


def recovered_weight(current: float, delta: float, cap: float) -> float:
    """Weight after a recall hit (R4): ``min(current + delta, cap)``, but never below ``current``."""
    return max(current, min(current + delta, cap))


def merged_weight(first: float, second: float, *, initial: float) -> float:
    """Weight of the memory a MERGE produces: the stronger of the two, never below ``initial``."""
    return max(first, second, initial)


class Weighted(Protocol):
    """What lazy decay reads of a memory, a sweep row or an eviction row."""

    @property
    def weight(self) -> float: ...
    @property
    def weight_at(self) -> datetime: ...
    @property
    def is_important(self) -> bool: ...
    @property
    def custom_tags(self) -> Sequence[str]: ...


def weight_now(memory: Weighted, now: datetime, settings: DecaySettings) -> float:
    """The memory's weight decayed lazily from its last write to ``now`` (R3)."""
    return decayed_weight(
        memory.weight,
        memory.weight_at,
        now,
        is_important=memory.is_important,
        exempt=is_decay_exempt(memory.custom_tags, settings),
        settings=settings,
    )


def type_initial_weight(memory: Memory, weights: InitialWeights) -> float:
    """The initial weight of the memory's kind: the cap of recall recovery and the UPDATE reset."""
    return initial_weight(
        weights,
        memory.ownership,
        memory.mem_type,
        is_important=memory.is_important,
        time_bound=memory.expire_at is not None,
    )
