"""LoCoMo evidence-retrieval harness: ingest conversations into Engram, ask the questions, score recall.

A question is a hit at k when one of the first k recalled memories came from one of its evidence
turns (``source_msg_id`` == dia_id). A brute-force cosine search over the same turns with the same
embedder runs beside it as the baseline, plus BM25 and a fused cosine + BM25 preview for reference.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

import numpy as np

from engram.actors.lexical import Bm25Index, fuse, tokenize
from engram.actors.memory_service import MemoryService
from engram.models.api import RecallRequest
from engram.models.errors import EngramError, ErrorCode
from engram.models.settings import Settings, load_settings
from engram.serve.evaluation.locomo_data import (
    ADVERSARIAL,
    CATEGORY_NAMES,
    Conversation,
    HarnessError,
    Question,
    Turn,
    load_locomo,
    memory_contents,
    select,
)
from engram.serve.evaluation.locomo_ingest import (
    EVAL_CAPACITY,
    build_engine,
    eval_settings,
    ingest_conversation_extract,
    ingest_conversation_turns,
    say,
)
from engram.serve.evaluation.metrics import ScoreCard, latency_summary
from engram.serve.memory_core import build_core
from engram.storage.embedders import Embedder
from engram.storage.embedding_base import embed_queries
from engram.storage.stores import Stores, open_stores

Mode = Literal["turns", "extract"]

TOP_K = 10
# Weights of the brute-force hybrid preview (cosine clipped to [0, 1], normalised BM25, no entities).
PREVIEW_WEIGHTS = {"w_semantic": 0.6, "w_lexical": 0.4, "w_entity": 0.0}


@dataclass
class EvalOptions:
    """What ``engram eval locomo`` was asked to do."""

    data: Path
    convs: list[str] | None = None
    mode: Mode = "turns"
    engine: str | None = None
    # turns mode: each turn carries the turn before it in its session as its context.
    turn_context: bool = True
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
        say(
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
            say(
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
        ingested, duplicates = await ingest_conversation_turns(
            service, conversation, progress, with_context=options.turn_context
        )
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
    say(
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
            say(progress, f"  answered {done}/{len(questions)} questions")


async def _baselines(
    embedder: Embedder, turns: Sequence[Turn], questions: Sequence[Question], run: _Run
) -> None:
    """Brute-force cosine, BM25 and a fused preview over the same turn contents."""
    if not questions:
        return
    contents, _ = memory_contents(turns)
    dia_ids = [t.dia_id for t in turns]
    turn_vectors = await embedder.embed(contents)
    question_vectors = await embed_queries(embedder, [q.question for q in questions])
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
        "turn_context": options.turn_context if options.mode == "turns" else None,
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
