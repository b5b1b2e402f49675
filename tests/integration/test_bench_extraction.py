"""``engram bench extraction`` (the vLLM device check) runs end to end on the CPU engines here."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engram.actors.prompts import few_shot_cases
from engram.loadtest.bench_extraction import bench_requests, main
from engram.models.settings import Settings
from engram.serve.evaluation.locomo_data import load_locomo

pytestmark = pytest.mark.integration

LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo_dev.json"


def test_requests_are_the_few_shot_cases_then_one_per_turn() -> None:
    if not LOCOMO.exists():
        pytest.skip(f"no LoCoMo split at {LOCOMO}")
    requests = bench_requests(LOCOMO, 2, Settings())
    turns = sum(len(s.turns) for s in load_locomo(LOCOMO)[0].sessions[:2])
    cases = few_shot_cases(datetime.now(UTC).date())
    assert len(requests) == len(cases) + turns
    assert {r.payload["ownership"] for r in requests[: len(cases)]} == {"USER", "AGENT"}
    # The prompt is production's: system rules, the few-shot turns, then the one message.
    assert requests[-1].messages[0].role == "system" and requests[-1].messages[-1].role == "user"


def test_the_bench_prints_throughput_and_batch_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--engine", "rules", "--sessions", "1"]
    argv += ["--data", str(LOCOMO)] if LOCOMO.exists() else []
    assert main(argv) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["engine"] == "rules" and figures["failures"] == 0
    assert figures["facts"] > 0 and figures["facts_per_s"] > 0
    assert sum(figures["batch_sizes"]) == figures["requests"]
    assert max(figures["batch_sizes"]) <= Settings().engine.batch_max_size
