"""What every embedder shares: the protocol, its errors and the normalisation of its rows (W9)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np


class EmbeddingError(Exception):
    """Some texts could not be embedded; carries the rows that could, so callers keep them (W9)."""

    def __init__(self, indices: Sequence[int], vectors: np.ndarray) -> None:
        self.indices: tuple[int, ...] = tuple(indices)
        self.vectors = vectors
        shown = ", ".join(str(i) for i in self.indices[:10])
        more = f" and {len(self.indices) - 10} more" if len(self.indices) > 10 else ""
        super().__init__(f"embedding failed for item(s) at index {shown}{more}")


class EmbedderUnavailableError(RuntimeError):
    """The embedder cannot answer at all (its server is down): the whole call fails, no item is
    tried alone."""


class Embedder(Protocol):
    """Embeds texts into L2-normalised float32 rows of ``dim`` columns."""

    model_name: str
    dim: int

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of shape (len(texts), dim); raises EmbeddingError naming failed indices."""
        ...


@runtime_checkable
class QueryEmbedder(Protocol):
    """An asymmetric embedder: questions are embedded differently from the texts they look for."""

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Query vectors of shape (len(texts), dim)."""
        ...


@dataclass(frozen=True, slots=True)
class Calibration:
    """An affine map of a model's query-to-memory cosines onto USE's scale, so ``recall.cosine_floor``,
    ``cosine_ceiling`` and ``min_relevance`` mean the same whichever model is on."""

    scale: float = 1.0
    offset: float = 0.0

    def apply(self, cosines: np.ndarray) -> np.ndarray:
        """``scale * cosine + offset`` for every cosine."""
        mapped: np.ndarray = np.asarray(cosines, dtype=np.float64) * self.scale + self.offset
        return mapped


IDENTITY = Calibration()


async def embed_queries(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Vectors for questions: the embedder's query side where it has one, else ``embed``."""
    if isinstance(embedder, QueryEmbedder):
        return await embedder.embed_queries(texts)
    return await embedder.embed(texts)


def calibration_of(embedder: Embedder) -> Calibration:
    """The embedder's cosine calibration (identity for models whose cosines are USE-like)."""
    found = getattr(embedder, "calibration", None)
    return found if isinstance(found, Calibration) else IDENTITY


def normalised(raw: Any, rows: int, dim: int) -> np.ndarray:
    """``raw`` as float32 rows of unit length; ValueError unless it is (rows, dim), finite, non-zero."""
    matrix = np.asarray(raw, dtype=np.float32)
    if matrix.shape != (rows, dim) or not np.all(np.isfinite(matrix)):
        raise ValueError(f"encoder returned shape {matrix.shape}, expected ({rows}, {dim}) finite values")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError("encoder returned a zero vector")
    normalised: np.ndarray = (matrix / norms).astype(np.float32, copy=False)
    return normalised
