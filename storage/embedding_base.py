"""What every embedder shares: the protocol, its errors and the normalisation of its rows (W9)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

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
