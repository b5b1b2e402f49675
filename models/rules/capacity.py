"""Per-user capacity dimensions, limits and eviction planning (W8, D3)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from engram.models.domain import Memory
from engram.models.settings import CapacitySettings

GLOBAL_DIMENSION = "global"
TOTAL_DIMENSION = "total"
APP_PREFIX = "app:"
IMPORTANT_PREFIX = "important:"


def app_dimension(app_id: str) -> str:
    """Counter dimension of one app: ``app:<app_id>``."""
    if not app_id:
        raise ValueError("an app dimension needs a non-empty app_id")
    return f"{APP_PREFIX}{app_id}"


def dimension_for(app_id: str) -> str:
    """The dimension a memory of ``app_id`` counts in; the empty app_id is global (D1)."""
    return app_dimension(app_id) if app_id else GLOBAL_DIMENSION


def important_dimension(dimension: str) -> str:
    """Counter of important memories within ``dimension``: ``important:<dimension>``."""
    return f"{IMPORTANT_PREFIX}{dimension}"


def dimensions_for(app_id: str) -> tuple[str, str]:
    """Every dimension a memory of ``app_id`` counts in: its own, then the total."""
    return dimension_for(app_id), TOTAL_DIMENSION


def limit_for(dimension: str, settings: CapacitySettings) -> int:
    """Maximum number of memories in ``dimension`` (important dimensions included)."""
    if dimension.startswith(IMPORTANT_PREFIX):
        return important_limit(dimension.removeprefix(IMPORTANT_PREFIX), settings)
    if dimension == GLOBAL_DIMENSION:
        return settings.global_limit
    if dimension == TOTAL_DIMENSION:
        return settings.total_limit
    if dimension.startswith(APP_PREFIX) and len(dimension) > len(APP_PREFIX):
        return settings.app_limit
    raise ValueError(f"unknown capacity dimension {dimension!r}")


def _ratio_floor(limit: int, ratio: float) -> int:
    # Rounding first keeps float noise (e.g. 100 * 0.29 = 28.999...) from losing a whole slot.
    return math.floor(round(limit * ratio, 9))


def important_limit(dimension: str, settings: CapacitySettings) -> int:
    """Maximum number of important memories in ``dimension``: floor(limit * ratio), at least 1."""
    return max(1, _ratio_floor(limit_for(dimension, settings), settings.important_ratio))


def important_allowed(important_count: int, dimension: str, settings: CapacitySettings) -> bool:
    """True when ``dimension`` may hold ``important_count`` important memories.

    Pass the count the dimension would hold with the new mark included.
    """
    return important_count <= important_limit(dimension, settings)


@dataclass(frozen=True, slots=True)
class EvictionCandidate:
    """A memory that eviction may pick; ``weight`` is already decayed to now."""

    memory_id: str
    weight: float
    last_recalled_at: datetime | None
    is_important: bool


@dataclass(frozen=True)
class EvictionPlan:
    """What to evict before a write; ``fits`` is False when the write must be rejected (42901)."""

    archive: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    fits: bool = True

    @property
    def victims(self) -> tuple[str, ...]:
        """Every evicted memory id, archived ones first."""
        return self.archive + self.delete


def _eviction_order(candidate: EvictionCandidate) -> tuple[float, bool, datetime | None, str]:
    # Never recalled sorts first (False < True); the datetime is compared only when both are set.
    recalled = candidate.last_recalled_at is not None
    return candidate.weight, recalled, candidate.last_recalled_at, candidate.memory_id


def select_victims(
    candidates: Sequence[EvictionCandidate],
    count: int,
    limit: int,
    settings: CapacitySettings,
) -> EvictionPlan:
    """Plan the eviction that makes room for one more memory in a dimension holding ``count`` of ``limit``.

    Evicts down to ``evict_target_ratio`` of the limit, lowest weight first, never important memories;
    when even every candidate would not make room, evicts nothing and returns ``fits=False``.
    """
    if count < limit:
        return EvictionPlan()
    target = min(_ratio_floor(limit, settings.evict_target_ratio), limit - 1)
    need = count - target
    ordinary = sorted((c for c in candidates if not c.is_important), key=_eviction_order)
    if len(ordinary) < count - limit + 1:
        return EvictionPlan(fits=False)
    victims = ordinary[:need]
    return EvictionPlan(
        archive=tuple(v.memory_id for v in victims if v.weight > settings.archive_threshold),
        delete=tuple(v.memory_id for v in victims if v.weight <= settings.archive_threshold),
    )


def counter_deltas(memories: Sequence[Memory], sign: int) -> Counter[str]:
    """Counter changes for adding (+1) or removing (-1) active memories (D3)."""
    deltas: Counter[str] = Counter()
    for memory in memories:
        for dimension in dimensions_for(memory.app_id):
            deltas[dimension] += sign
            if memory.is_important:
                deltas[important_dimension(dimension)] += sign
    return deltas
