"""Output models of the engine tasks: what extraction, evolution and session valuation ask an engine for.

Kept small and flat on purpose: small local models follow a simple schema far more reliably.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

EXTRACT_TASK = "extract_facts"
EVOLVE_TASK = "evolve_fact"

FactKind = Literal["preference", "personal", "plan", "procedure", "event", "health", "professional", "misc"]


class ExtractedFact(BaseModel):
    """One atomic fact, in the language of the messages it came from."""

    text: str = Field(min_length=1, max_length=2000)
    kind: FactKind = "misc"
    importance: float = Field(0.5, ge=0, le=1)
    # Days until the fact stops mattering ("next week" -> 7); None when it does not expire.
    expires_in_days: int | None = Field(None, ge=0, le=3650)
    entities: list[str] = Field(default_factory=list, max_length=16)
    # Deterministic engines know which message a fact came from; LLM answers are attributed in code.
    source_msg_id: str | None = None


class ExtractionOutput(BaseModel):
    """The facts worth remembering; empty when there is nothing."""

    facts: list[ExtractedFact] = Field(default_factory=list, max_length=50)


EvolutionEvent = Literal["ADD", "UPDATE", "SUPERSEDE", "NONE"]


class EvolutionOutput(BaseModel):
    """An engine's proposal for one new fact against up to ten similar memories."""

    event: EvolutionEvent
    # The short reference ("0".."9") of the existing memory it concerns; None for ADD.
    target: str | None = None
    # The merged statement for UPDATE.
    text: str | None = Field(None, max_length=2000)
    reason: str = Field("", max_length=500)


VALUE_SESSION_TASK = "value_session"


class MemoryValue(BaseModel):
    """An engine's word on one session memory, named by the short ref ("1", "2", ...) it was shown."""

    ref: str = Field(min_length=1, max_length=16)
    keep: bool
    reason: str = Field("", max_length=300)


class SessionValuation(BaseModel):
    """Which memories of a closing session are worth keeping beyond it (SPEC L6)."""

    memories: list[MemoryValue] = Field(default_factory=list, max_length=50)
