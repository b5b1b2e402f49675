"""Building an evaluation's store and filling it: settings with embedded stores and capacity far
above the data, then each conversation ingested as turns or through extraction."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any, TextIO

from engram.actors.engines.base import Engine
from engram.actors.engines.factory import engine_from_settings
from engram.actors.memory_service import MemoryService
from engram.models.api import AddRequest, AddStructuredRequest, Message
from engram.models.api_base import MAX_CONTEXT_CHARS
from engram.models.enums import Level, MemType, Ownership, Role
from engram.models.settings import Settings
from engram.serve.evaluation.locomo_data import Conversation, HarnessError, memory_contents, turn_content

# Far above any LoCoMo conversation (<= 700 turns): capacity eviction is not what is measured here.
EVAL_CAPACITY = 100_000
_MAX_MESSAGES_PER_ADD = 200


def eval_settings(base: Settings, data_dir: Path) -> tuple[Settings, dict[str, Any]]:
    """Settings for an evaluation: embedded stores under ``data_dir`` and capacity far above the data."""
    capacity = base.capacity.model_copy(
        update={"global_limit": EVAL_CAPACITY, "app_limit": EVAL_CAPACITY, "total_limit": EVAL_CAPACITY}
    )
    storage = base.storage.model_copy(
        update={"data_dir": data_dir, "database_url": "", "milvus_uri": "", "master_key_file": ""}
    )
    overrides: dict[str, Any] = {
        "capacity.global_limit": EVAL_CAPACITY,
        "capacity.app_limit": EVAL_CAPACITY,
        "capacity.total_limit": EVAL_CAPACITY,
        "storage": "embedded (SQLite + milvus-lite) in the evaluation data dir",
    }
    return base.model_copy(update={"capacity": capacity, "storage": storage}), overrides


def say(progress: TextIO, line: str) -> None:
    progress.write(line + "\n")
    progress.flush()


async def ingest_conversation_turns(
    service: MemoryService, conversation: Conversation, progress: TextIO, *, with_context: bool = True
) -> tuple[int, int]:
    """Store every turn as one USER / EPISODIC / GLOBAL memory, with the turn before it in its session
    as its context unless ``with_context`` is off; returns (turns, duplicates renamed)."""
    turns = conversation.turns()
    contents, duplicates = memory_contents(turns)
    dates = {t.dia_id: s.date for s in conversation.sessions for t in s.turns}
    before = previous_turns(conversation) if with_context else {}
    for done, (turn, content) in enumerate(zip(turns, contents, strict=True), start=1):
        await service.add_structured(
            AddStructuredRequest(
                user_id=conversation.sample_id,
                level=Level.GLOBAL,
                ownership=Ownership.USER,
                mem_type=MemType.EPISODIC,
                content=content,
                valid_at=dates[turn.dia_id],
                source_msg_id=turn.dia_id,
                context=before.get(turn.dia_id),
                sync=True,
            )
        )
        if done % 100 == 0 or done == len(turns):
            say(progress, f"  ingested {done}/{len(turns)} turns")
    return len(turns), duplicates


def previous_turns(conversation: Conversation) -> dict[str, str]:
    """Each turn's predecessor in its session, as stored content (a session's first turn has none),
    by dia id: what an agent storing turns as they come knows when it stores one."""
    before: dict[str, str] = {}
    for session in conversation.sessions:
        for prior, turn in pairwise(session.turns):
            before[turn.dia_id] = turn_content(prior)[:MAX_CONTEXT_CHARS]
    return before


def add_requests(conversation: Conversation) -> list[AddRequest]:
    """One ``add`` request per session (split at 200 messages); both speakers are people: role user."""
    requests: list[AddRequest] = []
    for session in conversation.sessions:
        messages = [
            Message(role=Role.USER, content=turn_content(t), msg_id=t.dia_id, timestamp=session.date)
            for t in session.turns
        ]
        for start in range(0, len(messages), _MAX_MESSAGES_PER_ADD):
            chunk = messages[start : start + _MAX_MESSAGES_PER_ADD]
            if chunk:
                requests.append(AddRequest(user_id=conversation.sample_id, messages=chunk))
    return requests


def build_engine(name: str | None, settings: Settings) -> Engine | None:
    """The named extraction engine configured by ``settings.engine``; None means the rules engine."""
    if name is None or name == "rules":
        return None
    if name not in ("openai", "local", "vllm"):
        raise HarnessError(f"unknown engine {name!r}: expected rules, openai, local or vllm")
    try:
        return engine_from_settings(settings.engine.model_copy(update={"name": name}))
    except (RuntimeError, ValueError) as exc:
        raise HarnessError(f"engine {name!r}: {exc}") from exc


async def ingest_conversation_extract(
    service: MemoryService, conversation: Conversation, progress: TextIO
) -> int:
    """Hand each session to extraction and evolution (``service.process_add``); returns turns handed."""
    process_add = getattr(service, "process_add", None)
    if not callable(process_add):
        raise HarnessError("extract mode needs the extraction pipeline (MemoryService.process_add)")
    requests = add_requests(conversation)
    for done, request in enumerate(requests, start=1):
        await process_add(request)
        say(progress, f"  extracted session request {done}/{len(requests)}")
    return sum(len(r.messages) for r in requests)
