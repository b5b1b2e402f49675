"""The deterministic ``rules`` engine: bilingual heuristics for extraction, no model (DESIGN decision 7).

It reads the request's structured payload, not the prompt: drop chit-chat, split into statements, keep
the speaker's own statements, rewrite them in the compact fact style, classify and score them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import date
from typing import Any

from pydantic import BaseModel

from engram.actors import statements
from engram.actors.engine_outputs import EXTRACT_TASK, ExtractedFact, ExtractionOutput
from engram.actors.engines.base import EngineError, StructuredRequest, UnsupportedTaskError
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
    # The named people of a transcript ("Caroline: ...", "Melanie: ..."), so a vocative is no content.
    participants = {name for m in messages if (name := statements.speaker_label(m["content"])[0]) is not None}
    for message in messages:
        if message.get("role") != speaker:
            continue
        msg_id = message.get("msg_id")
        for fact in message_facts(message["content"], speaker, today, participants):
            key = normalise_content(fact.text)
            if key not in seen:
                seen.add(key)
                facts.append(
                    fact.model_copy(update={"source_msg_id": None if msg_id is None else str(msg_id)})
                )
    return ExtractionOutput(facts=facts[:_MAX_FACTS])


def message_facts(
    content: str,
    speaker: statements.Speaker,
    today: date | None = None,
    participants: Collection[str] = (),
) -> list[ExtractedFact]:
    """The facts one message of ``speaker`` states about itself (chit-chat and general knowledge dropped).

    A turn of a transcript ("Caroline: ...") is read by ``transcript_facts`` instead.
    """
    name, body = statements.speaker_label(content)
    if name is not None:
        return transcript_facts(name, body, today, participants)
    facts: list[ExtractedFact] = []
    for statement in statements.split_statements(content):
        for clause in statements.split_clauses(statement):
            if statements.is_chitchat(clause) or not statements.is_personal(clause):
                continue
            text = statements.to_fact(clause, speaker)[:_MAX_TEXT].strip()
            if text and not statements.is_chitchat(text):
                facts.append(_fact(text, clause, today))
    return facts


def transcript_facts(
    name: str, body: str, today: date | None = None, participants: Collection[str] = ()
) -> list[ExtractedFact]:
    """One fact of a named speaker's turn: its informative statements, about anyone (events, plans,
    dates), in the fact style and labelled with the speaker ("Caroline: Went to a support group ...").

    The statements of one turn stay together: they refer to each other ("it", "they", "there"), and
    split into separate memories they lost that context (docs/evaluation.md, extract mode).
    """
    parts = [
        (fact, _fact(fact, statement, today).expires_in_days)
        for statement in statements.split_statements(body)
        if statements.is_informative(statement, participants or (name,))
        and (fact := statements.to_fact(statement, "user").strip())
    ]
    if not parts:
        return []
    text = " ".join(p if p.endswith((".", "!", "?")) else f"{p}." for p, _ in parts)
    joined = _fact(f"{name}: {text}"[:_MAX_TEXT], body, today)
    # The turn runs out only when all it says does: one plan for "next week" must not take the
    # rest of the turn with it.
    expiries = [days for _, days in parts]
    lasting = any(days is None for days in expiries)
    return [joined.model_copy(update={"expires_in_days": None if lasting else max(d for d in expiries if d)})]


def _fact(text: str, source: str, today: date | None) -> ExtractedFact:
    kind = statements.classify(text)
    return ExtractedFact(
        text=text,
        kind=kind,
        importance=statements.importance(text, kind),
        # Something that happened does not run out ("ran a race last Saturday").
        expires_in_days=None if kind == "event" else statements.expiry_days(source, today),
        entities=statements.entities(text),
    )


def _today(value: object) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        raise EngineError("extraction payload has a malformed today") from None
