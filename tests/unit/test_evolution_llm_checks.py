"""An LLM's evolution proposals are checked against the rules' own analysis (#31), over the whole
evolution set: whatever the LLM says, a changed value supersedes its predecessor and an additive
fact is kept beside the one it adds to. The proposals are the structured outputs an engine returns;
``Evolver.validated`` is the code that receives them."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from engram.actors.engine_outputs import EvolutionOutput
from engram.actors.evolution import Evolver, Existing, Plan
from engram.actors.evolution_rules import Candidate
from engram.actors.extraction import Fact
from engram.loadtest.evolution_cases import ADDED, CHANGED, Pair
from engram.models.enums import MemType, Ownership
from engram.models.settings import EvolutionSettings
from tests.support.memories import build_memory

pytestmark = pytest.mark.unit

WHEN = datetime(2026, 3, 1, tzinfo=UTC)
OLD_ID = "a" * 32


def _plan(pair: Pair, proposal: EvolutionOutput) -> Plan:
    old = build_memory(WHEN, memory_id=OLD_ID, content=pair.old, content_hash="old-hash")
    vector = np.ones(4, dtype=np.float32) / 2
    fact = Fact(pair.new, Ownership.USER, MemType.SEMANTIC, 0.5, WHEN, None, None)
    candidate = Candidate("0", OLD_ID, pair.old, "old-hash", cosine=0.6, valid_at=WHEN)
    evolver = Evolver(EvolutionSettings(), engine=None)
    return evolver.validated(fact, "new-hash", vector, [candidate], proposal, [Existing(old, vector)])


def _supersedes_the_old(plan: Plan) -> bool:
    return plan.op == "SUPERSEDE" and plan.target is not None and plan.target.memory_id == OLD_ID


@pytest.mark.parametrize("pair", CHANGED, ids=lambda p: p.new[:40])
def test_a_changed_value_the_llm_calls_new_still_supersedes(pair: Pair) -> None:
    assert _supersedes_the_old(_plan(pair, EvolutionOutput(event="ADD", reason="new fact")))


@pytest.mark.parametrize("pair", CHANGED, ids=lambda p: p.new[:40])
def test_a_changed_value_the_llm_calls_a_repeat_still_supersedes(pair: Pair) -> None:
    assert _supersedes_the_old(_plan(pair, EvolutionOutput(event="NONE", target="0", reason="same")))


@pytest.mark.parametrize("pair", CHANGED, ids=lambda p: p.new[:40])
def test_a_changed_value_the_llm_supersedes_is_superseded(pair: Pair) -> None:
    assert _supersedes_the_old(_plan(pair, EvolutionOutput(event="SUPERSEDE", target="0")))


@pytest.mark.parametrize("pair", ADDED, ids=lambda p: p.new[:40])
def test_an_additive_fact_the_llm_supersedes_with_is_kept_beside_it(pair: Pair) -> None:
    plan = _plan(pair, EvolutionOutput(event="SUPERSEDE", target="0", reason="replaces"))
    assert plan.op == "ADD" and plan.target is None


@pytest.mark.parametrize("pair", ADDED, ids=lambda p: p.new[:40])
def test_an_additive_fact_the_llm_adds_is_added(pair: Pair) -> None:
    plan = _plan(pair, EvolutionOutput(event="ADD"))
    assert plan.op == "ADD" and plan.target is None
