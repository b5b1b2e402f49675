"""An in-process vLLM engine for GPU nodes (extra ``[gpu]``): one ``LLM.chat`` call per batch.

Each request carries its own ``SamplingParams`` (temperature 0, its max_tokens, its JSON schema via
``StructuredOutputsParams(json=...)``; the old ``guided_json`` fields are gone). ``LLM`` blocks and
is not thread-safe, so batches run one at a time on the engine's own worker thread.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel

from engram.actors.engines.base import EngineError, StructuredRequest, parse_output
from engram.actors.engines.openai_engine import output_schema

logger = logging.getLogger(__name__)


class VllmEngine:
    """Structured generation with vLLM's offline ``LLM`` in this process."""

    name = "vllm"
    is_llm = True

    def __init__(self, model: str, **engine_args: Any) -> None:
        """Load ``model`` with vLLM (blocking, minutes for a large model); ``engine_args`` go to ``LLM``."""
        try:
            vllm: Any = importlib.import_module("vllm")
            sampling: Any = importlib.import_module("vllm.sampling_params")
        except ImportError as exc:
            raise RuntimeError(
                "the vllm engine needs the [gpu] extra and a CUDA GPU: pip install 'engram[gpu]'"
            ) from exc
        self._sampling_params = vllm.SamplingParams
        self._structured = sampling.StructuredOutputsParams
        self._llm: Any = vllm.LLM(model=model, **engine_args)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-vllm")
        logger.info("vllm engine: loaded %s", model)

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        """One result per request, in order; the batch is decoded together."""
        if not requests:
            return []
        if self._llm is None:
            return [EngineError("vllm engine is closed") for _ in requests]
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._batch, list(requests))

    async def close(self) -> None:
        """Finish the running batch and drop the model."""
        await asyncio.get_running_loop().run_in_executor(None, self._shutdown)

    def _shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._llm = None

    def _params(self, request: StructuredRequest) -> Any:
        return self._sampling_params(
            temperature=0,
            max_tokens=request.max_tokens,
            # A string: the cached schema dict is shared and must not be touched by vLLM.
            structured_outputs=self._structured(json=json.dumps(output_schema(request.output))),
        )

    def _batch(self, requests: list[StructuredRequest]) -> list[BaseModel | EngineError]:
        try:
            outputs = self._chat(requests)
        except Exception as exc:  # one bad request (e.g. too long) fails the whole call: isolate it
            logger.warning(
                "vllm engine: batch of %d failed (%s), one by one", len(requests), type(exc).__name__
            )
            return [self._single(r) for r in requests]
        return [self._parse(r, o) for r, o in zip(requests, outputs, strict=True)]

    def _single(self, request: StructuredRequest) -> BaseModel | EngineError:
        try:
            (output,) = self._chat([request])
        except Exception as exc:  # vLLM raises ValueError and others for requests it cannot serve
            logger.warning("vllm engine: task %s refused: %s", request.task, type(exc).__name__)
            return EngineError(f"vllm refused the request ({type(exc).__name__})")
        return self._parse(request, output)

    def _chat(self, requests: list[StructuredRequest]) -> list[Any]:
        conversations = [[{"role": m.role, "content": m.content} for m in r.messages] for r in requests]
        params = [self._params(r) for r in requests]
        return list(self._llm.chat(conversations, params, use_tqdm=False))

    def _parse(self, request: StructuredRequest, output: Any) -> BaseModel | EngineError:
        try:
            completion = output.outputs[0]
        except (AttributeError, IndexError):
            return EngineError("vllm returned no completion")
        if completion.finish_reason == "length":
            return EngineError("answer cut at max_tokens")
        try:
            return parse_output(request, completion.text)
        except EngineError as exc:
            logger.warning("vllm engine: task %s: %s", request.task, exc)
            return exc
