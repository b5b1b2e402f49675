"""The OpenAI-compatible engine (O2) against a canned chat-completions server on 127.0.0.1.

The server answers by the case name written in the last prompt message: valid JSON, malformed JSON,
JSON that does not fit the schema, a 500 then success, an answer slower than the timeout, ...
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from engram.actors.engine_outputs import EXTRACT_TASK, ExtractionOutput
from engram.actors.engines.base import ChatMessage, EngineError, StructuredRequest, generate_with_retry
from engram.actors.engines.openai_engine import OpenAIEngine
from tests.support.chat_server import Reply, chat_server, completion

pytestmark = pytest.mark.integration

TIMEOUT_S = 0.5
VALID = '{"facts": [{"text": "Likes green tea", "kind": "preference"}]}'


@dataclass
class CannedServer:
    """Answers by case name; the HTTP side is ``tests.support.chat_server``."""

    calls: Counter[str] = field(default_factory=Counter)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""

    async def answer(self, case: str) -> Reply:
        self.calls[case] += 1
        n = self.calls[case]
        if case == "valid":
            return Reply(VALID)
        if case == "malformed":
            return Reply('{"facts": [{"text": ')
        if case == "wrong-schema":
            return Reply('{"facts": "not a list"}')
        if case == "fenced":
            return Reply(f"```json\n{VALID}\n```")
        if case == "cut":
            return Reply(raw=completion('{"facts": [{"text": "Likes', finish_reason="length"))
        if case == "error-500-once":
            return Reply(status=500, raw={"error": "boom"}) if n == 1 else Reply(VALID)
        if case == "error-500":
            return Reply(status=500, raw={"error": "boom"})
        if case == "error-400":
            return Reply(status=400, raw={"error": {"message": "bad request"}})
        if case == "not-json-body":
            return Reply(raw="plain text")
        if case == "slow":
            await asyncio.sleep(TIMEOUT_S * 4)
            return Reply(VALID)
        if case == "malformed-once":
            return Reply("{oops" if n == 1 else VALID)
        if case == "no-choices":
            return Reply(raw={"choices": []})
        return Reply(status=404, raw={"error": "unknown case"})


def _request(case: str) -> StructuredRequest:
    messages = (ChatMessage("system", "Extract facts."), ChatMessage("user", case))
    return StructuredRequest(EXTRACT_TASK, messages, ExtractionOutput, max_tokens=64)


@pytest.fixture
async def server() -> AsyncIterator[CannedServer]:
    canned = CannedServer()
    # The lambda looks the answer up per request, so a test may swap ``canned.answer``.
    async with chat_server(lambda body: canned.answer(body["messages"][-1]["content"])) as http:
        canned.url, canned.bodies, canned.headers = http.url, http.bodies, http.headers
        yield canned


@pytest.fixture
async def engine(server: CannedServer) -> AsyncIterator[OpenAIEngine]:
    eng = OpenAIEngine(server.url, "test-model", api_key="sk-test", timeout_s=TIMEOUT_S, max_concurrency=4)
    yield eng
    await eng.close()


async def test_request_carries_the_schema_temperature_and_key(
    engine: OpenAIEngine, server: CannedServer
) -> None:
    (result,) = await engine.generate([_request("valid")])
    assert isinstance(result, ExtractionOutput)
    assert result.facts[0].text == "Likes green tea"
    body = server.bodies[0]
    assert body["model"] == "test-model"
    assert body["temperature"] == 0
    assert body["max_tokens"] == 64
    assert body["messages"] == [
        {"role": "system", "content": "Extract facts."},
        {"role": "user", "content": "valid"},
    ]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"] == ExtractionOutput.model_json_schema()
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == "ExtractionOutput"
    assert server.headers[0]["authorization"] == "Bearer sk-test"


async def test_each_request_of_a_batch_fails_alone(engine: OpenAIEngine, server: CannedServer) -> None:
    cases = [
        "valid",
        "malformed",
        "wrong-schema",
        "fenced",
        "cut",
        "error-500-once",
        "error-400",
        "not-json-body",
        "no-choices",
        "slow",
    ]
    results = await engine.generate([_request(c) for c in cases])
    by_case = dict(zip(cases, results, strict=True))
    for ok in ("valid", "fenced", "error-500-once"):
        assert isinstance(by_case[ok], ExtractionOutput), ok
    for bad in ("malformed", "wrong-schema", "cut", "error-400", "not-json-body", "no-choices", "slow"):
        assert isinstance(by_case[bad], EngineError), bad
    assert "ExtractionOutput" in str(by_case["wrong-schema"])
    assert "max_tokens" in str(by_case["cut"])
    assert "timed out" in str(by_case["slow"])
    # Transient failures (5xx, timeouts) are retried once inside the engine; bad answers and 4xx are not.
    assert server.calls["error-500-once"] == 2
    assert server.calls["slow"] == 2
    assert server.calls["malformed"] == 1
    assert server.calls["error-400"] == 1


async def test_retry_recovers_a_malformed_first_answer(engine: OpenAIEngine, server: CannedServer) -> None:
    results = await generate_with_retry(engine, [_request("valid"), _request("malformed-once")])
    assert all(isinstance(r, ExtractionOutput) for r in results)
    assert server.calls["malformed-once"] == 2
    assert server.calls["valid"] == 1


async def test_retries_do_not_multiply(engine: OpenAIEngine, server: CannedServer) -> None:
    # A request that keeps failing costs at most two attempts per failure kind, even through the caller's
    # re-ask: twice for the 5xx (inside the engine), twice for the bad answer (engine + generate_with_retry).
    results = await generate_with_retry(engine, [_request("error-500"), _request("malformed")])
    assert all(isinstance(r, EngineError) for r in results)
    assert server.calls["error-500"] == 2
    assert server.calls["malformed"] == 2
    # A new request with the same content is a new request: it gets its own attempts.
    (again,) = await engine.generate([_request("error-500")])
    assert isinstance(again, EngineError)
    assert server.calls["error-500"] == 4


async def test_concurrency_is_bounded(server: CannedServer) -> None:
    eng = OpenAIEngine(server.url, "m", timeout_s=5.0, max_concurrency=2)
    in_flight = 0
    peak = 0
    original = server.answer

    async def counting(case: str) -> Reply:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.05)
        try:
            return await original(case)
        finally:
            in_flight -= 1

    server.answer = counting  # type: ignore[method-assign]
    try:
        results = await eng.generate([_request("valid") for _ in range(6)])
    finally:
        await eng.close()
    assert all(isinstance(r, ExtractionOutput) for r in results)
    assert peak == 2


async def test_unreachable_server_is_an_engine_error() -> None:
    eng = OpenAIEngine("http://127.0.0.1:9/v1", "m", timeout_s=1.0)
    try:
        (result,) = await eng.generate([_request("valid")])
    finally:
        await eng.close()
    assert isinstance(result, EngineError)
    assert "transport" in str(result)
