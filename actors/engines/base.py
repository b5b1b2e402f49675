"""The engine contract: chat messages + an output model (its JSON schema) -> a parsed object.

Every engine takes a batch of requests and answers one result per request, in order: the parsed
output model, or an ``EngineError`` for that request alone (one bad answer never sinks the batch).
LLM engines read ``messages`` and constrain their output to ``output.model_json_schema()``;
deterministic engines (``rules``) read the structured ``payload`` instead and may refuse tasks they
do not implement with ``UnsupportedTaskError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ValidationError

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a prompt."""

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class StructuredRequest:
    """One structured-generation request: a task name, the prompt, the output model, the input."""

    task: str
    messages: tuple[ChatMessage, ...]
    output: type[BaseModel]
    payload: Mapping[str, Any] = field(default_factory=dict)
    max_tokens: int = 512


class EngineError(Exception):
    """A request an engine could not answer with a valid object (timeout, bad JSON, schema)."""


class UnsupportedTaskError(EngineError):
    """The engine does not implement this task (e.g. the rules engine asked to evolve)."""


class Engine(Protocol):
    """An LLM or deterministic engine behind the one call shape."""

    name: str
    is_llm: bool

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        """One result per request, in order."""
        ...

    async def close(self) -> None:
        """Release the engine's resources."""
        ...


def parse_output(request: StructuredRequest, text: str) -> BaseModel:
    """Parse an engine's raw text into the request's output model; EngineError when it does not fit."""
    try:
        return request.output.model_validate_json(_strip_fences(text))
    except ValidationError as exc:
        # Only the error count and kinds: the text may hold a user's content and must not be logged.
        kinds = sorted({str(e["type"]) for e in exc.errors()})
        raise EngineError(f"output does not match {request.output.__name__}: {kinds}") from None


def _strip_fences(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        stripped = stripped.rsplit("```", 1)[0]
    return stripped.strip()


async def generate_with_retry(
    engine: Engine, requests: Sequence[StructuredRequest], *, retries: int = 1
) -> list[BaseModel | EngineError]:
    """Ask the engine; requests that failed (other than unsupported tasks) are retried ``retries`` times."""
    results: list[BaseModel | EngineError] = list(await engine.generate(requests))
    for _ in range(retries):
        failed = [
            i
            for i, r in enumerate(results)
            if isinstance(r, EngineError) and not isinstance(r, UnsupportedTaskError)
        ]
        if not failed:
            break
        again = await engine.generate([requests[i] for i in failed])
        for i, result in zip(failed, again, strict=True):
            results[i] = result
    return results
