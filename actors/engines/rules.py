"""The deterministic ``rules`` engine: bilingual heuristics for extraction, no model (DESIGN decision 7).

It reads the request's structured payload, not the prompt: drop chit-chat, split into statements, keep
the speaker's own statements, rewrite them in the compact fact style, classify and score them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from pydantic import BaseModel

from engram.actors import statements
from engram.actors.engines.base import EngineError, StructuredRequest, UnsupportedTaskError
from engram.actors.tasks import EXTRACT_TASK, ExtractedFact, ExtractionOutput
from engram.models.hashing import normalise_content

# Which role speaks for which ownership (W3): user memories come from user messages only, and so on.
_ROLE_FOR_OWNERSHIP: dict[str, statements.Speaker] = {"USER": "user", "AGENT": "assistant"}
_MAX_FACTS = 50
_MAX_TEXT = 2000


class RulesEngine:
    """Rule-based extraction; every other task is refused with ``UnsupportedTaskError``."""

    name: str = "rules"
    is_llm: bool = False

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        """One result per request, in order."""
        results: list[BaseModel | EngineError] = []
        for request in requests:
            if request.task != EXTRACT_TASK:
                results.append(UnsupportedTaskError(f"the rules engine does not implement {request.task!r}"))
                continue
            try:
                results.append(extract(request.payload))
            except EngineError as exc:
                results.append(exc)
        return results

    async def close(self) -> None:
        """Nothing to release."""


def extract(payload: Mapping[str, Any]) -> ExtractionOutput:
    """Facts of one extraction payload (messages, ownership, today); EngineError when it is malformed."""
    speaker = _ROLE_FOR_OWNERSHIP.get(str(payload.get("ownership")))
    if speaker is None:
        raise EngineError("extraction payload needs ownership USER or AGENT")
    today = _today(payload.get("today"))
    messages = payload.get("messages")
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        raise EngineError("extraction payload needs a list of messages")
    facts: list[ExtractedFact] = []
    seen: set[str] = set()
    for message in messages:
        if not isinstance(message, Mapping) or not isinstance(message.get("content"), str):
            raise EngineError("each message needs a role and a string content")
        if message.get("role") != speaker:
            continue
        msg_id = message.get("msg_id")
        for fact in message_facts(message["content"], speaker, today):
            key = normalise_content(fact.text)
            if key not in seen:
                seen.add(key)
                facts.append(
                    fact.model_copy(update={"source_msg_id": None if msg_id is None else str(msg_id)})
                )
    return ExtractionOutput(facts=facts[:_MAX_FACTS])


def message_facts(
    content: str, speaker: statements.Speaker, today: date | None = None
) -> list[ExtractedFact]:
    """The facts one message of ``speaker`` states about itself (chit-chat and general knowledge dropped)."""
    facts: list[ExtractedFact] = []
    for statement in statements.split_statements(content):
        for clause in statements.split_clauses(statement):
            if statements.is_chitchat(clause) or not statements.is_personal(clause):
                continue
            text = statements.to_fact(clause, speaker)[:_MAX_TEXT].strip()
            if not text or statements.is_chitchat(text):
                continue
            kind = statements.classify(text)
            facts.append(
                ExtractedFact(
                    text=text,
                    kind=kind,
                    importance=statements.importance(text, kind),
                    expires_in_days=statements.expiry_days(clause, today),
                    entities=statements.entities(text),
                )
            )
    return facts


def _today(value: object) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        raise EngineError("extraction payload has a malformed today") from None
