"""Extraction throughput of an engine: the device check of the vLLM path (#18).

    engram bench extraction --data ../shared/data/locomo/locomo_dev.json [--engine vllm] [--sessions 2]

Builds the extraction requests production sends (``actors.extraction.extraction_request``): one
per few-shot case of the prompts (the seed's cases) and one per turn of the first ``--sessions``
sessions of the first LoCoMo conversation; hands them to the engine in batches of
``engine.batch_max_size``, as the extraction deployment's ``@serve.batch`` would; prints one JSON
object: requests, facts, failures, seconds, facts/s, requests/s and the batch sizes. On a GPU
machine with vLLM installed, ``--engine vllm`` with ``engine.model`` set runs the real engine
(``tests/integration/test_vllm_engine.py`` runs it there); any engine runs the same script.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from engram.actors.engine_outputs import ExtractionOutput
from engram.actors.engines.base import Engine, StructuredRequest
from engram.actors.engines.factory import engine_from_settings
from engram.actors.extraction import extraction_request
from engram.actors.prompts import few_shot_cases
from engram.models.api import AddRequest, Message
from engram.models.enums import Ownership, Role
from engram.models.settings import Settings, load_settings
from engram.serve.cli.options import positive_int
from engram.serve.evaluation.locomo_data import load_locomo, turn_content


@dataclass
class ExtractionFigures:
    """What one run measured (counts and seconds; no content)."""

    engine: str
    requests: int
    facts: int
    failures: int
    seconds: float
    facts_per_s: float
    requests_per_s: float
    batch_sizes: list[int] = field(default_factory=list)


def bench_requests(data: Path | None, sessions: int, settings: Settings) -> list[StructuredRequest]:
    """The few-shot cases, then one request per turn of the first conversation's first sessions."""
    now = datetime.now(UTC)
    messages: list[tuple[Ownership, Message]] = []
    for role, content in few_shot_cases(now.date()):
        speaker = Role(role)
        owner = Ownership.USER if speaker is Role.USER else Ownership.AGENT
        messages.append((owner, Message(role=speaker, content=content)))
    if data is not None:
        conversation = load_locomo(data)[0]
        for session in conversation.sessions[:sessions]:
            messages += [
                (Ownership.USER, Message(role=Role.USER, content=turn_content(t), msg_id=t.dia_id))
                for t in session.turns
            ]
    return [
        extraction_request(
            owner, [message], AddRequest(user_id="bench", messages=[message]), now, settings.extraction
        )
        for owner, message in messages
    ]


async def run_bench(
    engine: Engine, requests: Sequence[StructuredRequest], batch_size: int
) -> ExtractionFigures:
    """Every request through ``engine`` in batches of ``batch_size``, timed as a whole."""
    facts = failures = 0
    sizes: list[int] = []
    started = time.perf_counter()
    for start in range(0, len(requests), batch_size):
        batch = list(requests[start : start + batch_size])
        sizes.append(len(batch))
        for result in await engine.generate(batch):
            if isinstance(result, ExtractionOutput):
                facts += len(result.facts)
            else:  # an EngineError, or an answer of another shape
                failures += 1
    seconds = time.perf_counter() - started
    return ExtractionFigures(
        engine=engine.name,
        requests=len(requests),
        facts=facts,
        failures=failures,
        seconds=round(seconds, 3),
        facts_per_s=round(facts / seconds, 2) if seconds else 0.0,
        requests_per_s=round(len(requests) / seconds, 2) if seconds else 0.0,
        batch_sizes=sizes,
    )


def measure(settings: Settings, data: Path | None, sessions: int) -> ExtractionFigures:
    """Build the configured engine (loading a vLLM model takes minutes), run the bench, close it."""

    async def run() -> ExtractionFigures:
        engine = engine_from_settings(settings.engine)
        try:
            return await run_bench(
                engine, bench_requests(data, sessions, settings), settings.engine.batch_max_size
            )
        finally:
            await engine.close()

    return asyncio.run(run())


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m engram.loadtest.bench_extraction``: the figures as one JSON object."""
    parser = argparse.ArgumentParser(prog="engram bench extraction", description=__doc__)
    parser.add_argument("--config", help="YAML settings file (default: $ENGRAM_CONFIG)")
    parser.add_argument("--data", type=Path, help="a LoCoMo JSON file (default: the few-shot cases only)")
    parser.add_argument("--sessions", type=positive_int, default=1, help="sessions of its first conversation")
    parser.add_argument("--engine", choices=["rules", "openai", "local", "vllm"], help="default: engine.name")
    parser.add_argument("--model", help="engine.model (vllm: a local path or a model id)")
    args = parser.parse_args(argv)
    settings = load_settings(args.config)
    if args.engine:
        settings.engine.name = args.engine
    if args.model:
        settings.engine.model = args.model
    print(json.dumps(asdict(measure(settings, args.data, args.sessions))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
