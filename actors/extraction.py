"""Extraction (SPEC W3): a conversation becomes atomic facts, split by ownership at the source.

User facts come only from user messages and agent facts only from assistant and tool messages (the
seed's three prompt variants, and a tool variant): assistant and tool content never becomes a USER
memory (P5). System messages are never read. Each fact carries its provenance (``Source``) and,
when the deterministic poisoning check flags it, the signals that send it to quarantine; a flagged
sentence the engine did not keep is kept verbatim for review. Engine failures are retried once,
then the whole extraction fails with 50001 before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from engram.actors import statements
from engram.actors.engine_outputs import EXTRACT_TASK, ExtractedFact, ExtractionOutput, FactKind
from engram.actors.engines.base import Engine, EngineError, StructuredRequest, generate_with_retry
from engram.actors.lexical import tokenize
from engram.actors.prompts import extraction_messages
from engram.models.api import AddRequest, Message
from engram.models.api_base import bounded_context
from engram.models.enums import MemType, Ownership, Role
from engram.models.errors import EngramError, ErrorCode
from engram.models.provenance import Source, is_user_voice, source_for_role
from engram.models.rules import poisoning
from engram.models.settings import ExtractionSettings

_ROLES_OF = {Ownership.USER: (Role.USER,), Ownership.AGENT: (Role.ASSISTANT, Role.TOOL)}
_OWNER_OF = {Role.USER: Ownership.USER, Role.ASSISTANT: Ownership.AGENT, Role.TOOL: Ownership.AGENT}
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
    source: Source = Source.USER_MESSAGE
    # The request message the fact was taken from (its index), when known.
    message_index: int | None = None
    # Poisoning signals (``models.rules.poisoning``): a fact with any is stored QUARANTINED.
    quarantine: tuple[str, ...] = ()
    # The request message before the fact's own (Memory.context): what the fact answered.
    context: str | None = None


async def extract_facts(
    engine: Engine, request: AddRequest, now: datetime, settings: ExtractionSettings
) -> list[Fact]:
    """The facts of a conversation, per ownership, in the language they were said in."""
    wanted = [request.ownership] if request.ownership else [Ownership.USER, Ownership.AGENT]
    jobs: list[tuple[Ownership, Role, list[Message]]] = []
    for ownership in wanted:
        for role in _ROLES_OF[ownership]:
            if role is Role.TOOL and not engine.is_llm:
                continue  # the rules engine learns no facts from tool output (only flagged sentences)
            messages = [m for m in request.messages if m.role is role]
            worth = [m for m in messages if _worth_reading(m.content, settings)]
            if not worth:
                continue
            if settings.split_statements and engine.is_llm:
                jobs.extend((ownership, role, [s]) for s in _statement_messages(worth, settings))
            else:
                jobs.append((ownership, role, worth if settings.personal_prefilter else messages))
    facts: list[Fact] = []
    if jobs:
        requests = [
            extraction_request(ownership, messages, request, now, settings, tool=role is Role.TOOL)
            for ownership, role, messages in jobs
        ]
        results = await generate_with_retry(engine, requests)
        for (ownership, role, messages), result in zip(jobs, results, strict=True):
            if isinstance(result, EngineError) or not isinstance(result, ExtractionOutput):
                raise EngramError(ErrorCode.EXTRACTION_FAILED, f"extraction failed after a retry: {result}")
            facts.extend(
                _to_fact(f, ownership, messages, request, now, trust_source=not engine.is_llm, role=role)
                for f in result.facts
                if f.text.strip()
            )
    wanted_roles = {role for ownership in wanted for role in _ROLES_OF[ownership]}
    return _with_flagged_sentences(_unique(facts), request, now, wanted_roles)


def _with_flagged_sentences(
    facts: list[Fact], request: AddRequest, now: datetime, roles: set[Role]
) -> list[Fact]:
    """Facts marked by the poisoning check, plus each flagged sentence no fact already holds.

    A fact is flagged by its own text, or taken from a flagged sentence of its message: from tool or
    assistant content any flagged sentence taints the whole message; in the user's own words, only
    the facts sharing most words with the flagged sentence.
    """
    # By message: a flagged message taints the facts taken from it, never those of another.
    flagged: dict[int, list[tuple[str, tuple[str, ...]]]] = {}
    extra: list[Fact] = []
    for index, message in enumerate(request.messages):
        if message.role not in roles:
            continue
        source = source_for_role(message.role)
        for sentence in poisoning.flagged_sentences(message.content, source):
            signals = tuple(s.value for s in poisoning.assess(sentence, source).signals)
            flagged.setdefault(index, []).append((sentence, signals))
            extra.append(
                Fact(
                    text=sentence,
                    ownership=_OWNER_OF[message.role],
                    mem_type=MemType.PROCEDURAL,
                    importance=0.5,
                    valid_at=message.timestamp or now,
                    expire_at=None,
                    source_msg_id=message.msg_id,
                    entities=statements.entities(sentence)[:8],
                    custom_tags=list(request.strategy.custom_tags),
                    source=source,
                    message_index=index,
                    quarantine=signals,
                )
            )
    marked = [
        _marked(fact, flagged.get(fact.message_index, []) if fact.message_index is not None else [])
        for fact in facts
    ]
    held = {" ".join(tokenize(f.text)) or f.text.casefold() for f in marked}
    for fact in extra:
        key = " ".join(tokenize(fact.text)) or fact.text.casefold()
        if key not in held:
            held.add(key)
            marked.append(fact)
    return marked


def _marked(fact: Fact, flagged: list[tuple[str, tuple[str, ...]]]) -> Fact:
    signals = [s.value for s in poisoning.assess(fact.text, fact.source).signals]
    fact_tokens = set(tokenize(fact.text))
    for sentence, found in flagged:
        tokens = set(tokenize(sentence))
        shared = len(fact_tokens & tokens) / (len(fact_tokens) or 1)
        if not is_user_voice(fact.source) or shared >= 0.5:
            signals.extend(found)
    return replace(fact, quarantine=tuple(dict.fromkeys(signals))) if signals else fact


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
    *,
    tool: bool = False,
) -> StructuredRequest:
    """The engine request extracting ``ownership``'s facts from ``messages`` (prompt and payload);
    ``tool``: AGENT facts from tool outputs."""
    pairs = [(m.role.value, m.content) for m in messages]
    return StructuredRequest(
        task=EXTRACT_TASK,
        messages=extraction_messages(
            pairs, ownership=ownership.value, today=now.date(), focus=request.strategy.focus, tool=tool
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
    role: Role,
) -> Fact:
    source = _source_message(extracted, messages, trust_source=trust_source)
    index = _index_of(source, request)
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
        source=source_for_role(role),
        message_index=index,
        context=_context_before(index, request),
    )


def _context_before(index: int | None, request: AddRequest) -> str | None:
    """The conversation message just before message ``index`` (a system prompt or a tool's output
    is no turn of the conversation, and would tie the same long text to every fact)."""
    if index is None:
        return None
    for message in reversed(request.messages[:index]):
        if message.role in (Role.USER, Role.ASSISTANT):
            return bounded_context(message.content)
    return None


def _index_of(message: Message | None, request: AddRequest) -> int | None:
    """Where ``message`` (or the message a split statement came from) sits in the request."""
    if message is None:
        return None
    for index, candidate in enumerate(request.messages):
        if candidate is message:
            return index
    for index, candidate in enumerate(request.messages):
        if (candidate.role, candidate.msg_id) == (
            message.role,
            message.msg_id,
        ) and message.content in candidate.content:
            return index
    return None


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
