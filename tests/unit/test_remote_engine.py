"""RemoteEngine: per-request calls, retries over transient failures, EngineError when unreachable."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engram.actors.engines.base import EngineError, StructuredRequest
from engram.actors.engines.remote import RemoteEngine

pytestmark = pytest.mark.unit


class Answer(BaseModel):
    text: str


class ReplicaDiedError(Exception):
    pass


def _request(text: str) -> StructuredRequest:
    return StructuredRequest(task="extract", messages=(), output=Answer, payload={"text": text})


class Flaky:
    """Fails the first ``failures`` calls with a transient error, then echoes the payload."""

    def __init__(self, failures: int, error: type[BaseException] = ReplicaDiedError) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    async def __call__(self, request: StructuredRequest) -> BaseModel | EngineError:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error("replica gone")
        return Answer(text=str(request.payload["text"]))


def _engine(call: Flaky, attempts: int = 5) -> tuple[RemoteEngine, list[float]]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    engine = RemoteEngine(
        call, name="rules@serve", is_llm=False, transient=(ReplicaDiedError,), attempts=attempts,
        backoff_s=0.5, sleep=sleep,
    )  # fmt: skip
    return engine, slept


async def test_answers_come_back_in_request_order() -> None:
    engine, slept = _engine(Flaky(0))
    results = await engine.generate([_request("a"), _request("b"), _request("c")])
    assert results == [Answer(text="a"), Answer(text="b"), Answer(text="c")]
    assert slept == []
    assert engine.name == "rules@serve" and engine.is_llm is False


async def test_transient_failures_are_retried_with_growing_backoff() -> None:
    call = Flaky(3)
    engine, slept = _engine(call)
    assert await engine.generate([_request("x")]) == [Answer(text="x")]
    assert call.calls == 4
    assert slept == [0.5, 1.0, 2.0]


async def test_a_request_that_never_gets_through_is_an_engine_error() -> None:
    engine, _ = _engine(Flaky(100), attempts=3)
    [result] = await engine.generate([_request("x")])
    assert isinstance(result, EngineError)
    assert "after 3 attempts" in str(result)


async def test_other_errors_are_not_retried() -> None:
    call = Flaky(1, error=ValueError)
    engine, _ = _engine(call)
    with pytest.raises(ValueError, match="replica gone"):
        await engine.generate([_request("x")])
    assert call.calls == 1
