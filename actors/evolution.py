"""Evolution (SPEC W4, W5): each new fact against the ten most similar memories of its scope.

An LLM engine proposes ADD / UPDATE / SUPERSEDE / NONE and deterministic code validates the
proposal (only references it was given; a SUPERSEDE needs a real contradiction; an UPDATE needs a
merged statement). Without an LLM, in ``append`` mode, or when the LLM fails or times out, the
deterministic rules of ``evolution_rules`` decide (``evolution.degraded_mode``; off, the add fails
instead). Duplicates within one batch are caught first. An LLM NONE on a fact naming a value no
candidate holds, or contradicting the memory it cites, is overruled, and an LLM ADD of another value
of a candidate's attribute is a SUPERSEDE.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from engram.actors import evolution_rules as rules
from engram.actors import statements
from engram.actors.engine_outputs import EVOLVE_TASK, EvolutionOutput
from engram.actors.engines.base import Engine, EngineError, StructuredRequest, generate_with_retry
from engram.actors.extraction import Fact
from engram.actors.prompts import evolution_messages
from engram.models.domain import Memory
from engram.models.errors import EngramError, ErrorCode
from engram.models.hashing import normalise_content
from engram.models.metrics import METRICS
from engram.models.settings import EvolutionSettings

log = logging.getLogger(__name__)

Op = Literal["ADD", "UPDATE", "MERGE", "SUPERSEDE", "NONE"]


@dataclass(frozen=True, slots=True)
class Plan:
    """What to do with one new fact. ``target`` is the existing memory concerned, if any."""

    op: Op
    fact: Fact
    content_hash: str
    vector: np.ndarray
    reason: str
    target: Memory | None = None
    text: str | None = None


@dataclass(frozen=True, slots=True)
class Existing:
    """An existing memory with its vector: an evolution candidate."""

    memory: Memory
    vector: np.ndarray


class Evolver:
    """Plans evolution decisions; applies nothing (the memory service commits the plans)."""

    def __init__(self, settings: EvolutionSettings, engine: Engine | None) -> None:
        self._settings = settings
        self._engine = engine if engine is not None and engine.is_llm else None

    async def plan(
        self,
        facts: Sequence[Fact],
        vectors: np.ndarray,
        existing: Sequence[Existing],
        hash_of: Callable[[str], str],
        *,
        mode: Literal["llm", "append"],
        use_llm: bool = True,
    ) -> list[Plan]:
        """One plan per fact, in order; ``append`` only adds, with hash and semantic dedup (W5).

        ``use_llm=False`` (the LLM already failed on this add's extraction) has the rules decide.
        """
        hashes = [hash_of(f.text) for f in facts]
        candidates = [self._candidates(f, vectors[i], existing) for i, f in enumerate(facts)]
        proposals: dict[int, EvolutionOutput | str] = {}
        if mode == "llm" and self._engine is not None and use_llm:
            proposals = await self._propose(facts, candidates)
        plans: list[Plan] = []
        claimed: dict[str, str] = {}  # memory_id -> text after this batch's earlier plans
        for i, fact in enumerate(facts):
            duplicate = self._batch_duplicate(i, fact.text, hashes, vectors, plans)
            if duplicate is not None:
                plans.append(Plan("NONE", fact, hashes[i], vectors[i], duplicate))
                continue
            mine = [replace(c, text=claimed.get(c.memory_id, c.text)) for c in candidates[i]]
            if mode == "append":
                plans.append(self._append_only(fact, hashes[i], vectors[i], mine, existing))
                continue
            plan = self.validated(fact, hashes[i], vectors[i], mine, proposals.get(i), existing)
            if plan.target is not None and plan.target.memory_id in claimed and plan.op != "NONE":
                # An earlier fact of this batch already changed that memory: decide again on its new text.
                plan = self._by_rules(
                    fact, hashes[i], vectors[i], mine, existing, "after an earlier change: "
                )
            if plan.target is not None and plan.op in ("UPDATE", "MERGE"):
                claimed[plan.target.memory_id] = plan.text or plan.fact.text
            plans.append(plan)
        return plans

    def _candidates(
        self, fact: Fact, vector: np.ndarray, existing: Sequence[Existing]
    ) -> list[rules.Candidate]:
        scored = [
            (float(np.dot(e.vector, vector)), e.memory)
            for e in existing
            if e.memory.ownership is fact.ownership and e.memory.content is not None
        ]
        scored.sort(key=lambda pair: -pair[0])
        return [
            rules.Candidate(
                ref=str(n),
                memory_id=memory.memory_id,
                text=memory.content or "",
                content_hash=memory.content_hash,
                cosine=cosine,
                valid_at=memory.valid_at,
            )
            for n, (cosine, memory) in enumerate(scored[: self._settings.similar_top_n])
        ]

    def _batch_duplicate(
        self, i: int, text: str, hashes: Sequence[str], vectors: np.ndarray, earlier: Sequence[Plan]
    ) -> str | None:
        for j, plan in enumerate(earlier):
            if plan.op == "NONE":
                continue
            if hashes[j] == hashes[i]:
                return "duplicate of an earlier fact in the same batch"
            alike = float(np.dot(vectors[j], vectors[i])) >= self._settings.semantic_dedup_threshold
            if alike and not rules.new_information(text, plan.fact.text):
                return "semantic duplicate of an earlier fact in the same batch"
        return None

    async def _propose(
        self, facts: Sequence[Fact], candidates: Sequence[Sequence[rules.Candidate]]
    ) -> dict[int, EvolutionOutput | str]:
        """The LLM's proposals by fact index; a string says why there is none."""
        assert self._engine is not None
        asked = [i for i, c in enumerate(candidates) if c]
        if not asked:
            return {}
        requests = [
            StructuredRequest(
                task=EVOLVE_TASK,
                messages=evolution_messages(facts[i].text, [(c.ref, c.text) for c in candidates[i]]),
                output=EvolutionOutput,
                payload={"fact": facts[i].text, "candidates": [c.text for c in candidates[i]]},
                max_tokens=256,
            )
            for i in asked
        ]
        try:
            async with asyncio.timeout(self._settings.llm_timeout_s):
                results = await generate_with_retry(self._engine, requests)
        except TimeoutError:
            log.warning("evolution LLM timed out for %d facts; deterministic rules decide", len(asked))
            METRICS.degraded.inc(len(asked), {"stage": "evolution", "reason": "timeout"})
            return dict.fromkeys(asked, "LLM timed out")
        proposals: dict[int, EvolutionOutput | str] = {}
        for i, result in zip(asked, results, strict=True):
            if isinstance(result, EvolutionOutput):
                proposals[i] = result
            else:
                kind = type(result).__name__ if isinstance(result, EngineError) else "bad output"
                proposals[i] = f"LLM failed ({kind})"
                METRICS.degraded.inc(1, {"stage": "evolution", "reason": "engine_error"})
        return proposals

    def validated(
        self,
        fact: Fact,
        content_hash: str,
        vector: np.ndarray,
        candidates: Sequence[rules.Candidate],
        proposal: EvolutionOutput | str | None,
        existing: Sequence[Existing],
    ) -> Plan:
        """The plan for one fact: the LLM's proposal where the rules' own analysis bears it out,
        else the rules' decision (no proposal, a failed call, or a proposal the analysis refutes)."""
        if not isinstance(proposal, EvolutionOutput):
            if proposal and not self._settings.degraded_mode:
                # Degraded mode off: an LLM failure fails the add instead of the rules deciding (W5).
                raise EngramError(
                    ErrorCode.DEPENDENCY_UNAVAILABLE, f"evolution {proposal}; degraded mode is off"
                )
            prefix = f"{proposal}: " if proposal else ""
            return self._by_rules(fact, content_hash, vector, candidates, existing, prefix)
        by_ref = {c.ref: c for c in candidates}
        target = by_ref.get(proposal.target) if proposal.target is not None else None
        reason = f"LLM: {proposal.reason}".strip()
        if proposal.event == "ADD":
            hashed = self._hash_duplicate(content_hash, candidates, existing)
            if hashed is not None:
                return Plan("NONE", fact, content_hash, vector, "duplicate content (LLM said ADD)", hashed)
            changed = self._changed_attribute(fact, candidates)
            if changed is not None:
                # Same subject and attribute with another value: the old one must not stay current.
                return Plan(
                    "SUPERSEDE",
                    fact,
                    content_hash,
                    vector,
                    "LLM said ADD; contradicts a current memory",
                    _memory(changed, existing),
                )
            return Plan("ADD", fact, content_hash, vector, reason)
        if proposal.target is not None and target is None:
            return self._by_rules(
                fact, content_hash, vector, candidates, existing, "LLM cited an unknown memory; rejected: "
            )
        if proposal.event == "NONE":
            cited = [target] if target is not None else candidates
            if self._new_to_all(fact, cited):
                # A new code, number, date, amount, name or attribute value is never a repeat.
                return self._by_rules(
                    fact, content_hash, vector, candidates, existing, "LLM NONE overruled, new value: "
                )
            if any(rules.contradicts(c.text, fact.text) for c in cited):
                # "I quit Google" against "Works at Google" reads alike but ends it: never a repeat.
                return self._by_rules(
                    fact, content_hash, vector, candidates, existing, "LLM NONE overruled, contradiction: "
                )
            return Plan("NONE", fact, content_hash, vector, reason, _memory(target, existing))
        if target is None:
            return self._by_rules(
                fact, content_hash, vector, candidates, existing, f"LLM {proposal.event} without a target: "
            )
        if proposal.event == "UPDATE":
            if not proposal.text or not proposal.text.strip():
                return self._by_rules(
                    fact, content_hash, vector, candidates, existing, "LLM UPDATE without text: "
                )
            return Plan(
                "UPDATE", fact, content_hash, vector, reason, _memory(target, existing), proposal.text.strip()
            )
        if not rules.contradicts(fact.text, target.text):
            return Plan(
                "ADD", fact, content_hash, vector, "LLM SUPERSEDE without a real contradiction; kept both"
            )
        return Plan("SUPERSEDE", fact, content_hash, vector, reason, _memory(target, existing))

    def _by_rules(
        self,
        fact: Fact,
        content_hash: str,
        vector: np.ndarray,
        candidates: Sequence[rules.Candidate],
        existing: Sequence[Existing],
        prefix: str,
    ) -> Plan:
        merged = _richer_statement(fact, candidates)
        if merged is not None:
            return Plan(
                "MERGE",
                fact,
                content_hash,
                vector,
                prefix + "new fact contains the old one and adds detail",
                _memory(merged, existing),
                fact.text,
            )
        decision = rules.decide(
            rules.NewFact(fact.text, content_hash, fact.valid_at),
            candidates,
            dedup_threshold=self._settings.semantic_dedup_threshold,
        )
        target = _memory(decision.target, existing) if decision.target is not None else None
        return Plan(
            decision.event, fact, content_hash, vector, prefix + decision.reason, target, decision.merged_text
        )

    def _append_only(
        self,
        fact: Fact,
        content_hash: str,
        vector: np.ndarray,
        candidates: Sequence[rules.Candidate],
        existing: Sequence[Existing],
    ) -> Plan:
        hashed = self._hash_duplicate(content_hash, candidates, existing)
        if hashed is not None:
            return Plan("NONE", fact, content_hash, vector, "append: duplicate content", hashed)
        for candidate in candidates:
            if candidate.cosine >= self._settings.semantic_dedup_threshold and not rules.new_information(
                fact.text, candidate.text
            ):
                return Plan(
                    "NONE",
                    fact,
                    content_hash,
                    vector,
                    "append: semantic duplicate",
                    _memory(candidate, existing),
                )
        return Plan("ADD", fact, content_hash, vector, "append")

    @staticmethod
    def _changed_attribute(fact: Fact, candidates: Sequence[rules.Candidate]) -> rules.Candidate | None:
        """The most similar candidate the fact contradicts, if any: another value of its attribute,
        the end of its value ("Quit Google"), or the opposite preference (the rules' own analysis)."""
        for candidate in sorted(candidates, key=lambda c: -c.cosine):
            if rules.contradicts(candidate.text, fact.text):
                return candidate
        return None

    @staticmethod
    def _new_to_all(fact: Fact, candidates: Sequence[rules.Candidate]) -> bool:
        """Whether the fact names values that none of ``candidates`` holds (so it repeats none of them)."""
        if not statements.value_tokens(fact.text) and statements.claim(fact.text) is None:
            return False
        return all(rules.new_information(fact.text, c.text) for c in candidates)

    @staticmethod
    def _hash_duplicate(
        content_hash: str, candidates: Sequence[rules.Candidate], existing: Sequence[Existing]
    ) -> Memory | None:
        for candidate in candidates:
            if candidate.content_hash == content_hash:
                return _memory(candidate, existing)
        return None


MERGE_MIN_COSINE = 0.6
"""Below this similarity a contained phrase is a coincidence, not the same fact told in more detail."""


def _richer_statement(fact: Fact, candidates: Sequence[rules.Candidate]) -> rules.Candidate | None:
    """A candidate whose whole statement the new fact repeats and extends (MERGE)."""
    new = normalise_content(fact.text)
    for candidate in candidates:
        old = normalise_content(candidate.text)
        contained = old and old != new and _contains(new, old) and candidate.cosine >= MERGE_MIN_COSINE
        # "不再喜欢喝咖啡" holds "喜欢喝咖啡" and reverses it: a contradiction, not more detail.
        if contained and not rules.contradicts(candidate.text, fact.text):
            return candidate
    return None


def _contains(text: str, part: str) -> bool:
    """``part`` occurs in ``text`` as whole words ("k001" is no part of "k001a2b3")."""
    if statements.is_chinese(part):
        return part in text
    return re.search(rf"(?<!\w){re.escape(part)}(?!\w)", text) is not None


def _memory(candidate: rules.Candidate | None, existing: Sequence[Existing]) -> Memory | None:
    if candidate is None:
        return None
    for item in existing:
        if item.memory.memory_id == candidate.memory_id:
            return item.memory
    return None
