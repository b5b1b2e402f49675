"""Extraction (SPEC W3): a conversation becomes atomic facts, split by ownership at the source.

User facts come only from user messages and agent facts only from assistant messages (the seed's
three prompt variants); system messages are never read. Engine failures are retried once, then the
whole extraction fails with 50001 before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from engram.actors import statements
from engram.actors.engines.base import Engine, EngineError, StructuredRequest, generate_with_retry
from engram.actors.lexical import tokenize
from engram.actors.prompts import extraction_messages
from engram.actors.tasks import EXTRACT_TASK, ExtractedFact, ExtractionOutput, FactKind
from engram.models.api import AddRequest, Message
from engram.models.enums import MemType, Ownership, Role
from engram.models.errors import EngramError, ErrorCode
from engram.models.settings import ExtractionSettings

_ROLE_OF = {Ownership.USER: Role.USER, Ownership.AGENT: Role.ASSISTANT}
_TYPE_OF: dict[FactKind, MemType] = {
    "preference": MemType.SEMANTIC,
    "personal": MemType.SEMANTIC,
    "health": MemType.SEMANTIC,
    "professional": MemType.SEMANTIC,
    "misc": MemType.SEMANTIC,
    "plan": MemType.EPISODIC,
    "event": MemType.EPISODIC,
    "procedure": MemType.PROCEDURAL,
}


@dataclass(frozen=True, slots=True)
class Fact:
    """One extracted fact, ready for evolution."""

    text: str
    ownership: Ownership
    mem_type: MemType
    importance: float
    valid_at: datetime
    expire_at: datetime | None
    source_msg_id: str | None
    entities: list[str] = field(default_factory=list)
    custom_tags: list[str] = field(default_factory=list)


async def extract_facts(
    engine: Engine, request: AddRequest, now: datetime, settings: ExtractionSettings
) -> list[Fact]:
    """The facts of a conversation, per ownership, in the language they were said in."""
    wanted = [request.ownership] if request.ownership else [Ownership.USER, Ownership.AGENT]
    jobs: list[tuple[Ownership, list[Message]]] = []
    for ownership in wanted:
        messages = [m for m in request.messages if m.role is _ROLE_OF[ownership]]
        worth = [m for m in messages if _worth_reading(m.content, settings)]
        if not worth:
            continue
        if settings.split_statements and engine.is_llm:
            jobs.extend((ownership, [statement]) for statement in _statement_messages(worth, settings))
        else:
            jobs.append((ownership, worth if settings.personal_prefilter else messages))
    if not jobs:
        return []
    requests = [
        extraction_request(ownership, messages, request, now, settings) for ownership, messages in jobs
    ]
    results = await generate_with_retry(engine, requests)
    facts: list[Fact] = []
    for (ownership, messages), result in zip(jobs, results, strict=True):
        if isinstance(result, EngineError) or not isinstance(result, ExtractionOutput):
            raise EngramError(ErrorCode.EXTRACTION_FAILED, f"extraction failed after a retry: {result}")
        facts.extend(
            _to_fact(f, ownership, messages, request, now, trust_source=not engine.is_llm)
            for f in result.facts
            if f.text.strip()
        )
    return _unique(facts)


def _worth_reading(content: str, settings: ExtractionSettings) -> bool:
    """Greetings and thanks never reach an engine; with the prefilter, neither does general knowledge."""
    if not content.strip() or statements.is_chitchat(content):
        return False
    if not settings.personal_prefilter:
        return True
    name, body = statements.speaker_label(content)
    if name is not None:
        # A transcript turn: what anyone did or plans counts, not only the speaker's own statements.
        return any(statements.is_informative(s, (name,)) for s in statements.split_statements(body))
    return any(statements.is_personal(s) for s in statements.split_statements(content))


def _statement_messages(messages: Sequence[Message], settings: ExtractionSettings) -> list[Message]:
    """Each personal statement as a message of its own (same id and time as the one it came from)."""
    split: list[Message] = []
    for message in messages:
        for statement in statements.split_statements(message.content):
            if not settings.personal_prefilter or statements.is_personal(statement):
                split.append(message.model_copy(update={"content": statement}))
    return split


def extraction_request(
    ownership: Ownership,
    messages: Sequence[Message],
    request: AddRequest,
    now: datetime,
    settings: ExtractionSettings,
) -> StructuredRequest:
    """The engine request extracting ``ownership``'s facts from ``messages`` (prompt and payload)."""
    pairs = [(m.role.value, m.content) for m in messages]
    return StructuredRequest(
        task=EXTRACT_TASK,
        messages=extraction_messages(
            pairs, ownership=ownership.value, today=now.date(), focus=request.strategy.focus
        ),
        output=ExtractionOutput,
        payload={
            "messages": [{"role": m.role.value, "content": m.content, "msg_id": m.msg_id} for m in messages],
            "ownership": ownership.value,
            "today": now.date().isoformat(),
        },
        max_tokens=settings.max_tokens,
    )


def _to_fact(
    extracted: ExtractedFact,
    ownership: Ownership,
    messages: Sequence[Message],
    request: AddRequest,
    now: datetime,
    *,
    trust_source: bool,
) -> Fact:
    source = _source_message(extracted, messages, trust_source=trust_source)
    said_at = source.timestamp if source is not None and source.timestamp is not None else now
    expires = extracted.expires_in_days
    if expires is not None and (source is None or statements.expiry_days(source.content) is None):
        # An expiry is kept only when the source says something about time ("next week", "下周"):
        # small models attach expiries to everything, and a wrong one would archive a lasting fact.
        expires = None
    return Fact(
        text=extracted.text.strip(),
        ownership=ownership,
        mem_type=_TYPE_OF[extracted.kind],
        importance=extracted.importance,
        valid_at=said_at,
        expire_at=None if expires is None else said_at + timedelta(days=expires),
        source_msg_id=source.msg_id if source is not None else None,
        entities=list(dict.fromkeys(extracted.entities or statements.entities(extracted.text)))[:8],
        custom_tags=list(request.strategy.custom_tags),
    )


def _source_message(
    fact: ExtractedFact, messages: Sequence[Message], *, trust_source: bool
) -> Message | None:
    """The message a fact came from: a deterministic engine's word, else the message sharing most words.

    LLMs invent message ids ("1234567890"), so their word is not taken.
    """
    if trust_source and fact.source_msg_id is not None:
        for message in messages:
            if message.msg_id == fact.source_msg_id:
                return message
    if not messages:
        return None
    fact_tokens = set(tokenize(fact.text))

    def overlap(message: Message) -> float:
        tokens = set(tokenize(message.content))
        return len(fact_tokens & tokens) / (len(fact_tokens | tokens) or 1)

    # Latest message wins a tie: a later statement is the likelier source of a restated fact.
    best = max(reversed(range(len(messages))), key=lambda i: overlap(messages[i]))
    return messages[best]


def _unique(facts: list[Fact]) -> list[Fact]:
    seen: set[tuple[Ownership, str]] = set()
    unique: list[Fact] = []
    for fact in facts:
        key = (fact.ownership, " ".join(tokenize(fact.text)) or fact.text.casefold())
        if key not in seen:
            seen.add(key)
            unique.append(fact)
    return unique
