"""The explanation a recall returns when asked (``explain: true``, #31): for each result and for the
best few memories left out, what each relevance signal contributed and why a memory was left out.

Only memories inside the recall's own scope (its user, its levels, its app and session) are ever
described, and a left-out memory is named by id, never by content: a quarantined memory's text is
exactly what must not reach an agent.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field


class Signal(StrEnum):
    """The relevance signals fused by recall (R2)."""

    SEMANTIC = "semantic"
    LEXICAL = "lexical"
    ENTITY = "entity"


class LeftOutReason(StrEnum):
    """Why a memory of the recall's scope is not among the results."""

    BELOW_MIN_RELEVANCE = "below_min_relevance"  # visible, but its relevance is under min_relevance
    RANKED_BELOW_TOP_K = "ranked_below_top_k"  # passed min_relevance, outscored by top_k others
    SUPERSEDED = "superseded"  # replaced by a newer fact (superseded_by, at)
    EXPIRED = "expired"  # expire_at or the end of its validity has passed (at)
    NOT_VALID_AT_AS_OF = "not_valid_at_as_of"  # as_of falls outside its validity
    ARCHIVED = "archived"  # archived, and the recall did not ask for archived memories
    QUARANTINED = "quarantined"  # held for review (P5): never recalled until released
    OUT_OF_SCOPE = "out_of_scope"  # the request's filter excludes it (detail names the filter)
    SWITCHED_OFF = "switched_off"  # its app's memory switch is off (P1)


class SignalContribution(BaseModel):
    """One signal of one memory: its value in [0, 1] (None: absent, no evidence either way), the
    fusion weight it had for this memory, and its share of the fused relevance."""

    signal: Signal
    value: float | None
    weight: float
    contribution: float


class MemoryExplanation(BaseModel):
    """How one memory fared in one recall."""

    memory_id: str
    relevance: float
    signals: list[SignalContribution]
    # Stage 2 (R2): present for the memories that reached it.
    weight: float | None = None
    trust: float | None = None
    score: float | None = None
    reason: LeftOutReason | None = Field(None, description="None for a result; why it was left out otherwise")
    detail: str | None = None
    superseded_by: str | None = None
    at: datetime | None = None


class RecallExplanation(BaseModel):
    """The recall's explanation: its thresholds, its results in order, and the best memories left out."""

    min_relevance: float
    top_k: int
    results: list[MemoryExplanation]
    left_out: list[MemoryExplanation]
