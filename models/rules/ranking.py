"""Recall ranking (R2): over-fetch size, cosine-to-relevance mapping and the two-stage rank."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from engram.models.settings import RecallSettings


@dataclass(frozen=True, slots=True)
class RankInput:
    """One ANN hit: its relevance in [0, 1] and its weight decayed to now (R3)."""

    memory_id: str
    relevance: float
    weight: float
    # The trust score of the memory's source in (0, 1] (models.provenance.trust_score).
    trust: float = 1.0


@dataclass(frozen=True, slots=True)
class Ranked:
    """A hit that passed stage 1, with its final score."""

    memory_id: str
    relevance: float
    weight: float
    score: float


def overfetch_limit(top_k: int, settings: RecallSettings) -> int:
    """How many ANN hits to fetch for ``top_k`` results: max(factor * top_k, minimum)."""
    return max(settings.overfetch_factor * top_k, settings.overfetch_min)


def cosines_to_relevance(cosines: np.ndarray, settings: RecallSettings) -> np.ndarray:
    """Map cosine similarities linearly from [cosine_floor, cosine_ceiling] onto [0, 1], clipped; NaN -> 0."""
    span = settings.cosine_ceiling - settings.cosine_floor
    scaled = (np.asarray(cosines, dtype=np.float64) - settings.cosine_floor) / span
    relevance: np.ndarray = np.clip(np.nan_to_num(scaled, nan=0.0), 0.0, 1.0)
    return relevance


def cosine_to_relevance(cosine: float, settings: RecallSettings) -> float:
    """``cosines_to_relevance`` for one similarity."""
    return float(cosines_to_relevance(np.array([cosine]), settings)[0])


def rank(
    items: Iterable[RankInput],
    *,
    top_k: int,
    min_relevance: float,
    settings: RecallSettings,
) -> list[Ranked]:
    """Drop hits below ``min_relevance``, score the rest by weighted relevance and weight (scaled
    down by ``trust_weight`` for less trusted sources), keep ``top_k``."""
    if top_k <= 0:
        return []
    ranked = [
        Ranked(item.memory_id, item.relevance, item.weight, score_of(item, settings))
        for item in items
        if item.relevance >= min_relevance
    ]
    ranked.sort(key=lambda r: (-r.score, -r.relevance, r.memory_id))
    return ranked[:top_k]


def score_of(item: RankInput, settings: RecallSettings) -> float:
    """Stage 2's score: weighted relevance and weight, scaled down for a less trusted source."""
    return (settings.relevance_weight * item.relevance + settings.weight_weight * item.weight) * (
        1.0 - settings.trust_weight * (1.0 - item.trust)
    )
