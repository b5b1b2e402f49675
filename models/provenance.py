"""Provenance and trust of a memory (P5): how it came in, and how far recall may lean on it.

``memories.source_type`` holds a ``Source`` value; rows written before provenance existed hold
"conversation", read as a user message (a USER memory) or an assistant message (an AGENT memory),
which is where W3 took them from. Any other unknown value reads as an import. Pure functions.
"""

from __future__ import annotations

from enum import StrEnum

from engram.models.enums import Ownership, Role


class Source(StrEnum):
    """How a memory came in; the value is what ``memories.source_type`` stores (String(32))."""

    USER_MESSAGE = "user_message"
    ASSISTANT_MESSAGE = "assistant_message"
    TOOL_OUTPUT = "tool_output"
    STRUCTURED = "structured"  # add_structured / batch_add_structured: an app wrote it as is
    IMPORT = "import"
    SESSION_CLOSE = "session_close"  # a continuity memory written when a session closed


class Trust(StrEnum):
    """How far a memory's source is believed: what the user said or an app wrote deliberately is
    HIGH; what the assistant said, or a line imported from elsewhere, MEDIUM; tool output LOW."""

    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


LEGACY_CONVERSATION = "conversation"
"""The ``source_type`` of every extracted memory before provenance was recorded."""

_TRUST: dict[Source, Trust] = {
    Source.USER_MESSAGE: Trust.HIGH,
    Source.STRUCTURED: Trust.HIGH,
    Source.SESSION_CLOSE: Trust.HIGH,
    Source.ASSISTANT_MESSAGE: Trust.MEDIUM,
    Source.IMPORT: Trust.MEDIUM,
    Source.TOOL_OUTPUT: Trust.LOW,
}

# The factor a trust level gives a recall score at full trust weighting (RecallSettings.trust_weight).
_TRUST_SCORE: dict[Trust, float] = {Trust.HIGH: 1.0, Trust.MEDIUM: 0.6, Trust.LOW: 0.3}

_FROM_ROLE: dict[Role, Source] = {
    Role.USER: Source.USER_MESSAGE,
    Role.ASSISTANT: Source.ASSISTANT_MESSAGE,
    Role.TOOL: Source.TOOL_OUTPUT,
}


def source_of(source_type: str, ownership: Ownership = Ownership.USER) -> Source:
    """The ``Source`` a stored ``source_type`` stands for; legacy "conversation" by ownership."""
    if source_type == LEGACY_CONVERSATION:
        return Source.USER_MESSAGE if ownership is Ownership.USER else Source.ASSISTANT_MESSAGE
    try:
        return Source(source_type)
    except ValueError:
        return Source.IMPORT


def source_for_role(role: Role) -> Source:
    """The source of a fact taken from a message of ``role`` (system messages are never read)."""
    try:
        return _FROM_ROLE[role]
    except KeyError:
        raise ValueError(f"no memory comes from a {role.value} message") from None


def trust_of(source: Source) -> Trust:
    """The trust level of a source."""
    return _TRUST[source]


def trust_score(trust: Trust) -> float:
    """The trust level as a number in (0, 1]: 1.0 for HIGH."""
    return _TRUST_SCORE[trust]


def is_user_voice(source: Source) -> bool:
    """True for sources that speak for the user: their firm preferences are not instructions."""
    return source in (Source.USER_MESSAGE, Source.STRUCTURED, Source.SESSION_CLOSE)


def trusted_score(score: float, trust: Trust, trust_weight: float) -> float:
    """A recall score scaled by trust: ``score * (1 - trust_weight * (1 - trust_score))``.

    HIGH trust, or ``trust_weight`` 0 (the default), leaves the score unchanged.
    """
    return score * (1.0 - trust_weight * (1.0 - trust_score(trust)))
