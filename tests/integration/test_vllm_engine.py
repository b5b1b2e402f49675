"""The in-process vLLM engine (O2) on a CUDA GPU, with a small instruct model named by the environment.

Runs only where vllm is importable, ``torch.cuda.is_available()``, and ``ENGRAM_VLLM_TEST_MODEL``
names a model (a local path or a hub id the machine can reach).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator
from datetime import date

import pytest

from engram.actors.engine_outputs import EVOLVE_TASK, EXTRACT_TASK, EvolutionOutput, ExtractionOutput
from engram.actors.engines.base import StructuredRequest
from engram.actors.prompts import evolution_messages, extraction_messages

pytestmark = [pytest.mark.integration, pytest.mark.gpu]


def _unavailable() -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed (extra [gpu])"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU (torch.cuda.is_available() is False)"
    if not os.environ.get("ENGRAM_VLLM_TEST_MODEL"):
        return "ENGRAM_VLLM_TEST_MODEL is not set (a small instruct model to load)"
    return None


_reason = _unavailable()
if _reason:
    pytest.skip(_reason, allow_module_level=True)

from engram.actors.engines.vllm_engine import VllmEngine  # noqa: E402


@pytest.fixture(scope="module")
async def engine() -> AsyncIterator[VllmEngine]:
    eng = VllmEngine(os.environ["ENGRAM_VLLM_TEST_MODEL"], gpu_memory_utilization=0.5, max_model_len=4096)
    yield eng
    await eng.close()


async def test_structured_extraction_and_evolution_parse(engine: VllmEngine) -> None:
    conversation = [("user", "Hi, my name is John. I am a software engineer and I'm allergic to peanuts.")]
    requests = [
        StructuredRequest(
            EXTRACT_TASK,
            extraction_messages(conversation, ownership="USER", today=date(2026, 1, 1)),
            ExtractionOutput,
        ),
        StructuredRequest(
            EVOLVE_TASK,
            evolution_messages("Loves cheese pizza", [("0", "Likes cheese pizza")]),
            EvolutionOutput,
            max_tokens=128,
        ),
    ]
    extraction, evolution = await engine.generate(requests)
    assert isinstance(extraction, ExtractionOutput), extraction
    assert extraction.facts
    assert isinstance(evolution, EvolutionOutput), evolution
    assert evolution.target in (None, "0")


def test_the_device_check_extracts_the_few_shot_cases_and_a_locomo_session() -> None:
    """What ``engram bench extraction --engine vllm`` prints on a GPU machine (docs/operations.md)."""
    from pathlib import Path

    from engram.loadtest.bench_extraction import measure
    from engram.models.settings import Settings

    data = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo_dev.json"
    settings = Settings(
        engine={
            "name": "vllm",
            "model": os.environ["ENGRAM_VLLM_TEST_MODEL"],
            "vllm": {"gpu_memory_utilization": 0.4, "max_model_len": 4096},
        }
    )
    figures = measure(settings, data if data.exists() else None, sessions=1)
    print(figures)
    assert figures.facts > 0 and figures.failures < figures.requests
    assert max(figures.batch_sizes) > 1
