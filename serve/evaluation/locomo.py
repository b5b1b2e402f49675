"""LoCoMo evidence-retrieval harness: ingest conversations into Engram, ask the questions, score recall.

A question is a hit at k when one of the first k recalled memories came from one of its evidence
turns (``source_msg_id`` == dia_id). A brute-force cosine search over the same turns with the same
embedder runs beside it as the baseline, plus BM25 and a fused cosine + BM25 preview for reference.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TextIO

import numpy as np

from engram.actors.engines.base import Engine
from engram.actors.engines.factory import engine_from_settings
from engram.actors.lexical import Bm25Index, fuse, tokenize
from engram.actors.memory_service import MemoryService
from engram.models.api import AddRequest, AddStructuredRequest, Message, RecallRequest
from engram.models.enums import Level, MemType, Ownership, Role
from engram.models.errors import EngramError, ErrorCode
from engram.models.settings import Settings, load_settings
from engram.serve.evaluation.metrics import ScoreCard, latency_summary, parse_evidence, parse_session_date
from engram.serve.memory_core import build_core
from engram.storage.embedders import Embedder
from engram.storage.stores import Stores, open_stores

Mode = Literal["turns", "extract"]

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ADVERSARIAL = 5
TOP_K = 10
# Far above any LoCoMo conversation (<= 700 turns): capacity eviction is not what is measured here.
EVAL_CAPACITY = 100_000
# Weights of the brute-force hybrid preview (cosine clipped to [0, 1], normalised BM25, no entities).
PREVIEW_WEIGHTS = {"w_semantic": 0.6, "w_lexical": 0.4, "w_entity": 0.0}
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_MAX_MESSAGES_PER_ADD = 200


class HarnessError(Exception):
    """The evaluation cannot run as asked (bad data, missing pipeline, a data dir in use)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a LoCoMo conversation."""

    dia_id: str
    speaker: str
    text: str
    caption: str | None


@dataclass(frozen=True, slots=True)
class Session:
    """One dated session of a conversation; ``date`` is None when its date does not parse."""

    number: int
    date: datetime | None
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Question:
    """One question with its category and parsed evidence dia ids."""

    question: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    """A LoCoMo sample: its sessions in order and its questions."""

    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    # Every dia id of the full conversation, kept when sessions are cut (``--max-sessions``).
    dia_ids: frozenset[str]

    def turns(self) -> list[Turn]:
        """Every turn, session by session."""
        return [turn for session in self.sessions for turn in session.turns]


@dataclass
class EvalOptions:
    """What ``engram eval locomo`` was asked to do."""

    data: Path
    convs: list[str] | None = None
    mode: Mode = "turns"
    engine: str | None = None
    out: Path | None = None
    data_dir: Path | None = None
    max_sessions: int | None = None
    config: str | None = None


@dataclass
class _Run:
    """Accumulated results of one evaluation run."""

    engram: ScoreCard = field(default_factory=ScoreCard)
    baseline: ScoreCard = field(default_factory=ScoreCard)
    bm25: ScoreCard = field(default_factory=ScoreCard)
    hybrid: ScoreCard = field(default_factory=ScoreCard)
    latencies_ms: list[float] = field(default_factory=list)
    timeouts: int = 0
    turns: int = 0
    memories: int = 0
    duplicates: int = 0
    undated_sessions: int = 0
    skipped: dict[str, int] = field(
        default_factory=lambda: {"adversarial": 0, "no_evidence": 0, "outside_sessions": 0}
    )
    unknown_evidence_ids: int = 0
    ingest_s: float = 0.0
    recall_s: float = 0.0
    per_conversation: dict[str, dict[str, Any]] = field(default_factory=dict)


# --- data ----------------------------------------------------------------------------------------


def load_locomo(path: Path) -> list[Conversation]:
    """Parse a LoCoMo JSON file (a list of samples); HarnessError when it is not one."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HarnessError(f"cannot read LoCoMo data {path}: {exc}") from exc
    if not isinstance(raw, list):
        raise HarnessError(f"{path} is not a LoCoMo file (expected a JSON list of conversations)")
    try:
        return [_conversation(sample) for sample in raw]
    except (KeyError, TypeError, ValueError) as exc:
        raise HarnessError(f"{path} is not a LoCoMo file: {type(exc).__name__}: {exc}") from exc


def _conversation(sample: Mapping[str, Any]) -> Conversation:
    conv = sample["conversation"]
    sessions: list[Session] = []
    numbers = sorted(int(m.group(1)) for key in conv if (m := _SESSION_KEY.match(key)))
    for number in numbers:
        turns = tuple(
            Turn(
                dia_id=str(t["dia_id"]),
                speaker=str(t["speaker"]),
                text=str(t["text"]),
                caption=str(t["blip_caption"]) if t.get("blip_caption") else None,
            )
            for t in conv[f"session_{number}"]
        )
        try:
            date: datetime | None = parse_session_date(str(conv.get(f"session_{number}_date_time", "")))
        except ValueError:
            date = None
        sessions.append(Session(number, date, turns))
    questions = tuple(
        Question(str(qa["question"]), int(qa["category"]), tuple(parse_evidence(qa.get("evidence", []))))
        for qa in sample.get("qa", [])
    )
    dia_ids = frozenset(t.dia_id for s in sessions for t in s.turns)
    return Conversation(
        str(sample["sample_id"]),
        str(conv["speaker_a"]),
        str(conv["speaker_b"]),
        tuple(sessions),
        questions,
        dia_ids,
    )


def select(
    conversations: Sequence[Conversation], ids: Sequence[str] | None, max_sessions: int | None
) -> list[Conversation]:
    """The conversations named by ``ids`` (all when None), cut to their first ``max_sessions``."""
    chosen = list(conversations)
    if ids:
        known = {c.sample_id: c for c in conversations}
        missing = [i for i in ids if i not in known]
        if missing:
            raise HarnessError(f"unknown conversation id(s): {', '.join(missing)}")
        chosen = [known[i] for i in dict.fromkeys(ids)]
    if max_sessions is not None:
        chosen = [replace(c, sessions=c.sessions[:max_sessions]) for c in chosen]
    return chosen


def turn_content(turn: Turn) -> str:
    """The memory content of a turn: "<speaker>: <text>", plus the image caption when there is one."""
    content = f"{turn.speaker}: {turn.text}"
    return f"{content} [image: {turn.caption}]" if turn.caption else content


def memory_contents(turns: Sequence[Turn]) -> tuple[list[str], int]:
    """One content per turn and how many repeated an earlier one (those get their dia id prefixed).

    The service deduplicates identical contents of one user, which would hide an evidence turn.
    """
    seen: set[str] = set()
    contents: list[str] = []
    duplicates = 0
    for turn in turns:
        content = turn_content(turn)
        if content in seen:
            duplicates += 1
            content = f"[{turn.dia_id}] {content}"
        seen.add(content)
        contents.append(content)
    return contents, duplicates


def scored_questions(conversation: Conversation, run: _Run) -> list[Question]:
    """Non-adversarial questions with known evidence, all of it in the (possibly cut) conversation.

    Evidence ids naming no turn of the full conversation are dropped (data errors, counted).
    """
    kept = {t.dia_id for t in conversation.turns()}
    questions: list[Question] = []
    for q in conversation.questions:
        if q.category == ADVERSARIAL:
            run.skipped["adversarial"] += 1
            continue
        evidence = tuple(e for e in q.evidence if e in conversation.dia_ids)
        run.unknown_evidence_ids += len(q.evidence) - len(evidence)
        if not evidence:
            run.skipped["no_evidence"] += 1
        elif not set(evidence) <= kept:
            run.skipped["outside_sessions"] += 1
        else:
            questions.append(Question(q.question, q.category, evidence))
    return questions


# --- settings and stores -----------------------------------------------------------------------------


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


def _say(progress: TextIO, line: str) -> None:
    progress.write(line + "\n")
    progress.flush()


# --- ingestion -----------------------------------------------------------------------------------------


async def ingest_conversation_turns(
    service: MemoryService, conversation: Conversation, progress: TextIO
) -> tuple[int, int]:
    """Store every turn as one USER / EPISODIC / GLOBAL memory; returns (turns, duplicates renamed)."""
    turns = conversation.turns()
    contents, duplicates = memory_contents(turns)
    dates = {t.dia_id: s.date for s in conversation.sessions for t in s.turns}
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
                sync=True,
            )
        )
        if done % 100 == 0 or done == len(turns):
            _say(progress, f"  ingested {done}/{len(turns)} turns")
    return len(turns), duplicates


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
        _say(progress, f"  extracted session request {done}/{len(requests)}")
    return sum(len(r.messages) for r in requests)


# --- evaluation ----------------------------------------------------------------------------------------


async def evaluate(
    options: EvalOptions,
    *,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
    progress: TextIO | None = None,
) -> dict[str, Any]:
    """Run the whole evaluation and return its figures (the JSON line of ``engram eval locomo``)."""
    progress = progress or sys.stderr
    started = time.perf_counter()
    conversations = select(load_locomo(options.data), options.convs, options.max_sessions)
    with ExitStack() as stack:
        data_dir = options.data_dir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="engram-eval-"))
        )
        run_settings, overrides = eval_settings(settings or load_settings(options.config), data_dir)
        _say(
            progress,
            f"locomo: {len(conversations)} conversation(s), mode {options.mode}, data dir {data_dir}; "
            f"capacity limits raised to {EVAL_CAPACITY} (eviction is not measured)",
        )
        stores = await open_stores(run_settings, embedder=embedder)
        try:
            run = await _evaluate_all(options, conversations, run_settings, stores, progress)
        finally:
            await stores.close()
        model_name = stores.embedder.model_name
    return _report(options, conversations, run, model_name, overrides, time.perf_counter() - started)


async def _evaluate_all(
    options: EvalOptions,
    conversations: Sequence[Conversation],
    settings: Settings,
    stores: Stores,
    progress: TextIO,
) -> _Run:
    engine = build_engine(options.engine, settings) if options.mode == "extract" else None
    try:
        service = build_core(settings, stores, engine=engine).service
        if options.mode == "extract" and not callable(getattr(service, "process_add", None)):
            raise HarnessError("extract mode needs the extraction pipeline (MemoryService.process_add)")
        run = _Run()
        for i, conversation in enumerate(conversations, start=1):
            _say(
                progress,
                f"[{i}/{len(conversations)}] {conversation.sample_id}: "
                f"{len(conversation.turns())} turns, {options.mode} mode",
            )
            await _evaluate_one(options, conversation, service, stores, run, progress)
        return run
    finally:
        if engine is not None:
            await engine.close()


async def _evaluate_one(
    options: EvalOptions,
    conversation: Conversation,
    service: MemoryService,
    stores: Stores,
    run: _Run,
    progress: TextIO,
) -> None:
    user_id = conversation.sample_id
    if await stores.vectors.count(user_id):
        raise HarnessError(f"user {user_id} already has memories in the data dir; use a fresh --data-dir")
    run.undated_sessions += sum(1 for s in conversation.sessions if s.date is None)
    t0 = time.perf_counter()
    if options.mode == "turns":
        ingested, duplicates = await ingest_conversation_turns(service, conversation, progress)
        run.duplicates += duplicates
    else:
        ingested = await ingest_conversation_extract(service, conversation, progress)
    ingest_s = time.perf_counter() - t0
    memories = await stores.vectors.count(user_id)
    run.turns += ingested
    run.memories += memories
    run.ingest_s += ingest_s
    questions = scored_questions(conversation, run)
    t1 = time.perf_counter()
    asked_before, hits_before, baseline_before = (
        run.engram.questions,
        run.engram.overall.hit10,
        run.baseline.overall.hit10,
    )
    await _ask(service, user_id, questions, run, progress)
    run.recall_s += time.perf_counter() - t1
    await _baselines(stores.embedder, conversation.turns(), questions, run)
    asked = run.engram.questions - asked_before
    summary = {
        "turns": ingested,
        "memories": memories,
        "questions": asked,
        "hit@10": round((run.engram.overall.hit10 - hits_before) / (asked or 1), 4),
        "baseline_hit@10": round((run.baseline.overall.hit10 - baseline_before) / (asked or 1), 4),
        "ingest_s": round(ingest_s, 2),
    }
    run.per_conversation[user_id] = summary
    _say(
        progress,
        f"  {user_id}: {asked} questions, hit@10 {summary['hit@10']} "
        f"(baseline {summary['baseline_hit@10']}), ingest {ingest_s:.1f} s",
    )


async def _ask(
    service: MemoryService, user_id: str, questions: Sequence[Question], run: _Run, progress: TextIO
) -> None:
    for done, q in enumerate(questions, start=1):
        request = RecallRequest(user_id=user_id, query=q.question, top_k=TOP_K, min_relevance=0.0)
        start = time.perf_counter()
        try:
            response = await service.recall(request)
            retrieved = [m.source_msg_id for m in response.memories]
        except EngramError as exc:
            if exc.code is not ErrorCode.RECALL_TIMEOUT:
                raise
            run.timeouts += 1
            retrieved = []
        run.latencies_ms.append((time.perf_counter() - start) * 1000)
        # Hit bookkeeping (R4) runs after the answer; waiting here keeps it out of the next timing.
        await service.drain()
        run.engram.add(q.category, retrieved, q.evidence)
        if done % 50 == 0 or done == len(questions):
            _say(progress, f"  answered {done}/{len(questions)} questions")


async def _baselines(
    embedder: Embedder, turns: Sequence[Turn], questions: Sequence[Question], run: _Run
) -> None:
    """Brute-force cosine, BM25 and a fused preview over the same turn contents."""
    if not questions:
        return
    contents, _ = memory_contents(turns)
    dia_ids = [t.dia_id for t in turns]
    turn_vectors = await embedder.embed(contents)
    question_vectors = await embedder.embed([q.question for q in questions])
    similarities = question_vectors.astype(np.float64) @ turn_vectors.astype(np.float64).T
    index = Bm25Index([tokenize(c) for c in contents])
    no_entities = np.zeros(len(contents))
    for row, q in enumerate(questions):
        cosine = similarities[row]
        lexical = index.normalised_scores(tokenize(q.question))
        fused = fuse(np.clip(cosine, 0.0, 1.0), lexical, no_entities, **PREVIEW_WEIGHTS)
        for card, scores in ((run.baseline, cosine), (run.bm25, lexical), (run.hybrid, fused)):
            top = np.argsort(-scores, kind="stable")[:TOP_K]
            card.add(q.category, [dia_ids[j] for j in top], q.evidence)


def _report(
    options: EvalOptions,
    conversations: Sequence[Conversation],
    run: _Run,
    model_name: str,
    overrides: dict[str, Any],
    elapsed_s: float,
) -> dict[str, Any]:
    per_category: dict[str, dict[str, Any]] = {}
    baseline_by_cat = run.baseline.category_figures("baseline_")
    for category, figures in run.engram.category_figures().items():
        per_category[str(category)] = {
            "name": CATEGORY_NAMES.get(category, "unknown"),
            "questions": run.engram.by_category[category].questions,
            **figures,
            **baseline_by_cat.get(category, {}),
        }
    return {
        "benchmark": "locomo",
        "mode": options.mode,
        "engine": (options.engine or "default") if options.mode == "extract" else None,
        "embedder": model_name,
        "data": str(options.data),
        "conversations": [c.sample_id for c in conversations],
        "max_sessions": options.max_sessions,
        "top_k": TOP_K,
        "questions": run.engram.questions,
        **run.engram.figures(),
        **run.baseline.figures("baseline_"),
        **run.bm25.figures("bm25_"),
        **run.hybrid.figures("hybrid_preview_"),
        "hybrid_preview_weights": PREVIEW_WEIGHTS,
        **latency_summary(run.latencies_ms),
        "timeouts": run.timeouts,
        "per_category": per_category,
        "per_conversation": run.per_conversation,
        "turns": run.turns,
        "memories": run.memories,
        "duplicate_contents": run.duplicates,
        "undated_sessions": run.undated_sessions,
        "skipped_questions": run.skipped,
        "unknown_evidence_ids": run.unknown_evidence_ids,
        "ingest_s": round(run.ingest_s, 2),
        "recall_s": round(run.recall_s, 2),
        "elapsed_s": round(elapsed_s, 2),
        "settings_overrides": overrides,
    }


def run(options: EvalOptions, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """CLI entry: evaluate, print the JSON line last on stdout (and to ``--out``); 2 on a harness error."""
    # Resolved per call, not at import: tests and callers may have replaced sys.stdout / sys.stderr.
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        report = asyncio.run(evaluate(options, progress=stderr))
    except HarnessError as exc:
        stderr.write(f"engram eval locomo: {exc}\n")
        return 2
    line = json.dumps(report, ensure_ascii=False, sort_keys=False)
    if options.out is not None:
        options.out.parent.mkdir(parents=True, exist_ok=True)
        options.out.write_text(line + "\n", encoding="utf-8")
    stdout.write(line + "\n")
    stdout.flush()
    return 0
