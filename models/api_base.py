"""What every request model of the HTTP contract shares (SPEC C1): size bounds, the tag and
content types, the frozen base that refuses unknown fields, the level/scope rule."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

from engram.models.enums import Level

MAX_MESSAGES = 200
MAX_CONTENT_CHARS = 16_000
MAX_TAGS = 32
# A memory's context (the message it answered) only feeds the lexical index: a bound keeps a pasted
# document from outweighing the memory itself.
MAX_CONTEXT_CHARS = 2_000

Tag = Annotated[str, StringConstraints(min_length=1, max_length=64, strip_whitespace=True)]
Content = Annotated[str, StringConstraints(min_length=1, max_length=MAX_CONTENT_CHARS)]
ContextText = Annotated[str, StringConstraints(max_length=MAX_CONTEXT_CHARS)]


def bounded_context(text: str | None) -> str | None:
    """A context as stored: None when blank, else its last ``MAX_CONTEXT_CHARS`` characters (the
    end of a message is what the next one answers)."""
    if text is None or not text.strip():
        return None
    return text.strip()[-MAX_CONTEXT_CHARS:]


class RequestModel(BaseModel):
    """The base of every request: frozen, and an unknown field is refused (C1), never ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def check_scope(level: Level | None, app_id: str | None, session_id: str | None) -> None:
    """Refuse a level without the id that names it (an APP memory needs its app, a SESSION its session)."""
    if level is Level.APP and not app_id:
        raise ValueError("level APP needs an app_id")
    if level is Level.SESSION and not session_id:
        raise ValueError("level SESSION needs a session_id")
