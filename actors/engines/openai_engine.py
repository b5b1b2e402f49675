"""An engine for any OpenAI-compatible chat server (``vllm serve``, llama.cpp, OpenAI, ...).

Each request is one ``POST {base_url}/chat/completions`` with ``response_format`` json_schema and
temperature 0; the requests of a batch run concurrently, at most ``max_concurrency`` at a time.

Retry rule (at most two attempts per failure kind):
- transient failures (timeout, connection error, HTTP 429 or 5xx) are retried once here; when the
  second attempt fails too, the request is remembered as spent, and if the caller re-asks that same
  request object soon after (``generate_with_retry`` does), the remembered error is answered at once
  instead of two more attempts;
- a bad answer (malformed JSON, does not fit the schema, cut at max_tokens) and other HTTP errors are
  not retried here: the caller's ``generate_with_retry`` re-asks once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import httpx
from pydantic import BaseModel

from engram.actors.engines.base import EngineError, StructuredRequest, parse_output

logger = logging.getLogger(__name__)

_RETRY_BACKOFF_S = 0.2
# How long, and how many, exhausted requests are remembered for the caller's immediate re-ask.
_SPENT_TTL_S = 600.0
_SPENT_MAX = 1024


class TransientEngineError(EngineError):
    """A request that failed for a reason that may pass (timeout, connection, 429, 5xx)."""


@lru_cache(maxsize=64)
def output_schema(output: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of an output model (cached: models are fixed classes)."""
    return output.model_json_schema()


def request_body(model: str, request: StructuredRequest) -> dict[str, Any]:
    """The chat-completions body for one request: json_schema response format, temperature 0."""
    return {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "temperature": 0,
        "max_tokens": request.max_tokens,
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": request.output.__name__,
                "schema": output_schema(request.output),
                "strict": True,
            },
        },
    }


def answer_text(data: Any) -> str:
    """The assistant text of a chat-completions answer; EngineError when it has none or was cut short."""
    try:
        choice = data["choices"][0]
        content = choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise EngineError("answer has no choices[0].message.content") from None
    if not isinstance(content, str):
        raise EngineError("answer content is not text")
    if choice.get("finish_reason") == "length":
        raise EngineError("answer cut at max_tokens")
    return content


class OpenAIEngine:
    """Structured generation through an OpenAI-compatible ``/chat/completions`` endpoint."""

    name = "openai"
    is_llm = True

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        timeout_s: float = 20.0,
        max_concurrency: int = 8,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self._url = f"{base_url.rstrip('/')}/chat/completions"
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout_s = timeout_s
        self._client = client if client is not None else httpx.AsyncClient(timeout=timeout_s)
        self._owns_client = client is None
        self._semaphore = asyncio.Semaphore(max_concurrency)
        # id(request) -> (the request itself, when, its error); the identity check keeps a reused id
        # from matching another request.
        self._spent: OrderedDict[int, tuple[StructuredRequest, float, EngineError]] = OrderedDict()

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        """One result per request, in order; each request fails alone."""
        return list(await asyncio.gather(*(self._one(r) for r in requests)))

    async def close(self) -> None:
        """Close the HTTP client when this engine created it."""
        if self._owns_client:
            await self._client.aclose()

    async def _one(self, request: StructuredRequest) -> BaseModel | EngineError:
        spent = self._take_spent(request)
        if spent is not None:
            logger.info("openai engine: task %s already failed twice, not asking again", request.task)
            return spent
        async with self._semaphore:
            result = await self._attempt(request)
            if isinstance(result, TransientEngineError):
                await asyncio.sleep(_RETRY_BACKOFF_S)
                result = await self._attempt(request)
                if isinstance(result, TransientEngineError):
                    self._remember_spent(request, result)
        return result

    async def _attempt(self, request: StructuredRequest) -> BaseModel | EngineError:
        try:
            return parse_output(request, await self._ask(request))
        except EngineError as exc:
            logger.warning("openai engine: task %s failed: %s", request.task, exc)
            return exc

    async def _ask(self, request: StructuredRequest) -> str:
        body = request_body(self._model, request)
        try:
            async with asyncio.timeout(self._timeout_s):
                response = await self._client.post(
                    self._url, json=body, headers=self._headers, timeout=self._timeout_s
                )
        except (TimeoutError, httpx.TimeoutException):
            raise TransientEngineError(f"timed out after {self._timeout_s:g} s") from None
        except httpx.TransportError as exc:
            raise TransientEngineError(f"transport error {type(exc).__name__}") from None
        # Only the status code: an error body may echo the prompt, which holds user content.
        if response.status_code == 429 or response.status_code >= 500:
            raise TransientEngineError(f"HTTP {response.status_code}")
        if response.status_code >= 400:
            raise EngineError(f"HTTP {response.status_code}")
        try:
            data = response.json()
        except json.JSONDecodeError:
            raise EngineError("server answered with a body that is not JSON") from None
        return answer_text(data)

    def _take_spent(self, request: StructuredRequest) -> EngineError | None:
        now = time.monotonic()
        while self._spent:
            _, (_, when, _) = next(iter(self._spent.items()))
            if now - when < _SPENT_TTL_S:
                break
            self._spent.popitem(last=False)
        entry = self._spent.get(id(request))
        if entry is None or entry[0] is not request:
            return None
        return entry[2]

    def _remember_spent(self, request: StructuredRequest, error: EngineError) -> None:
        self._spent[id(request)] = (request, time.monotonic(), error)
        self._spent.move_to_end(id(request))
        while len(self._spent) > _SPENT_MAX:
            self._spent.popitem(last=False)
