"""USE and e5 fused into one vector (issue #31): the ``fused`` embedder provider.

Each text's vector is ``[sqrt(1 - w) * use, sqrt(w) * e5]`` with ``w`` = ``E5_SHARE``: unit length,
so one cosine search (snapshot, Milvus, sealed copies) gives ``(1 - w) * cos_use + w * cos_e5``
with no change to how vectors are stored. e5's cosines are 3.4x less spread than USE's, so
``w`` = 0.9 still leaves USE about a quarter of the signal: enough to hold e5's same-language bias
in mixed stores. The fused cosine is then mapped onto USE's scale (``CALIBRATION``) before
``recall.cosine_floor`` / ``cosine_ceiling`` apply. Both numbers come from the LoCoMo development
split by leave-one-conversation-out; ``tools/calibrate_fusion.py`` recomputes them.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from functools import partial

import numpy as np

from engram.storage.e5_embedder import E5_DIM, E5_MODEL_NAME, E5Embedder
from engram.storage.embedding_base import Calibration, normalised
from engram.storage.use_embedder import USE_DIM, USE_MODEL_NAME, UseEmbedder, embed_in_batches

# e5's share of the fused cosine, chosen by leave-one-conversation-out on LoCoMo dev.
E5_SHARE = 0.9
FUSED_MODEL_NAME = f"{USE_MODEL_NAME}+{E5_MODEL_NAME}@{E5_SHARE}"
FUSED_DIM = USE_DIM + E5_DIM
# Question-to-turn cosines over LoCoMo dev (each question against its conversation's turns): USE's
# sit at 0.20 +- 0.11, the fused ones at 0.72 +- 0.04. The map sends the fused mean and spread onto
# USE's, so a relevance means as many deviations above chance for both (tools/fusion_weights.py).
CALIBRATION = Calibration(scale=2.9429, offset=-1.9215)


class FusedEmbedder:
    """USE and e5 in one vector; questions take e5's query side."""

    def __init__(self, threads: int = 1, batch_size: int = 64) -> None:
        self.model_name = FUSED_MODEL_NAME
        self.dim = FUSED_DIM
        self.calibration = CALIBRATION
        self._use = UseEmbedder(threads=threads, batch_size=batch_size)
        self._e5 = E5Embedder(threads=threads)
        self._batch_size = batch_size
        self._weights = (math.sqrt(1.0 - E5_SHARE), math.sqrt(E5_SHARE))

    def warm_up(self) -> None:
        """Load both models now (blocking) so that the first request does not pay for it."""
        self._fused(["warm up"], query=True)

    def _fused(self, texts: list[str], *, query: bool) -> np.ndarray:
        use = normalised(self._use.encode_now(texts), len(texts), USE_DIM)
        e5 = self._e5.queries_now(texts) if query else self._e5.passages_now(texts)
        return np.hstack([self._weights[0] * use, self._weights[1] * e5])

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of texts to be found, shape (len(texts), 896), off the event loop."""
        return await self._run(texts, query=False)

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of questions, shape (len(texts), 896), off the event loop."""
        return await self._run(texts, query=True)

    async def _run(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encode = partial(self._fused, query=query)
        return await asyncio.to_thread(embed_in_batches, encode, list(texts), self._batch_size, self.dim)
