"""The ``openai`` embedder (O2) against a real loopback server speaking ``/v1/embeddings``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from engram.models.settings import Settings
from engram.storage.collection_models import EmbeddingModelMismatchError
from engram.storage.embedders import EmbedderUnavailableError, EmbeddingError, build_embedder
from engram.storage.openai_embedder import EmbedderDimensionError, OpenAIEmbedder
from engram.storage.stores import open_stores
from tests.support.chat_server import Reply
from tests.support.embedding_server import embedding_server, hashed_vector

pytestmark = pytest.mark.integration


def _unit(values: list[float]) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


async def test_texts_go_in_batches_and_come_back_in_order() -> None:
    async with embedding_server(dim=32) as server:
        embedder = OpenAIEmbedder(server.url, "hash-32", api_key="sk-test-key", batch_size=64)
        texts = [f"memory number {i} about tea" for i in range(150)]
        vectors = await embedder.embed(texts)
        await embedder.close()
    # The first call learns the dimension with one probe, then 64 + 64 + 22.
    assert [len(b["input"]) for b in server.bodies] == [1, 64, 64, 22]
    assert {b["model"] for b in server.bodies} == {"hash-32"}
    assert all(h["authorization"] == "Bearer sk-test-key" for h in server.headers)
    assert embedder.dim == 32 and vectors.shape == (150, 32)
    for i in (0, 63, 64, 149):  # the server shuffles its items: rows follow the inputs anyway
        assert np.allclose(vectors[i], _unit(hashed_vector(texts[i], 32)), atol=1e-6)


async def test_a_timeout_is_retried_then_the_whole_call_fails() -> None:
    async with embedding_server(dim=16, delay_s=1.0) as server:
        embedder = OpenAIEmbedder(
            server.url, "hash-16", dim=16, timeout_s=0.2, attempts=3, first_delay_s=0.01
        )
        with pytest.raises(EmbedderUnavailableError):
            await embedder.embed(["one", "two", "three"])
        await embedder.close()
    # Three attempts of the one batch, and no text tried alone: the server is not answering at all.
    assert [len(b["input"]) for b in server.bodies] == [3, 3, 3]


async def test_a_passing_server_error_is_retried() -> None:
    failures = [Reply(status=503, raw={"error": "busy"}), Reply(status=429, raw={"error": "slow down"})]

    async with embedding_server(dim=16, fault=lambda texts: failures.pop(0) if failures else None) as server:
        embedder = OpenAIEmbedder(server.url, "hash-16", dim=16, attempts=3, first_delay_s=0.01)
        vectors = await embedder.embed(["green tea", "black coffee"])
        await embedder.close()
    assert len(server.bodies) == 3
    assert np.allclose(vectors[1], _unit(hashed_vector("black coffee", 16)), atol=1e-6)


@pytest.mark.parametrize(
    "broken",
    [
        {"data": [{"index": 0, "embedding": "not numbers"}]},
        {"nothing": "here"},
        {"data": [{"index": 0, "embedding": [1.0, 2.0]}]},  # another dimension
        {"data": [{"index": 0, "embedding": [float("nan")] * 16}]},
    ],
)
async def test_a_malformed_answer_fails_only_its_text(broken: dict[str, object]) -> None:
    def fault(texts: list[str]) -> Reply | None:
        if "poison" not in " ".join(texts):
            return None
        if len(texts) == 1:
            return Reply(raw=broken)
        return Reply(raw={"data": []})  # the batch holding it: too few rows, so tried one by one

    async with embedding_server(dim=16, fault=fault) as server:
        embedder = OpenAIEmbedder(server.url, "hash-16", dim=16, batch_size=8)
        texts = ["likes jazz", "poison pill", "lives in Porto", "plays chess"]
        with pytest.raises(EmbeddingError) as failed:
            await embedder.embed(texts)
        await embedder.close()
    assert failed.value.indices == (1,)
    for i in (0, 2, 3):
        assert np.allclose(failed.value.vectors[i], _unit(hashed_vector(texts[i], 16)), atol=1e-6)
    assert [len(b["input"]) for b in server.bodies] == [4, 1, 1, 1, 1]


async def test_a_dimension_other_than_the_configured_one_is_refused_at_start() -> None:
    async with embedding_server(dim=24) as server:
        embedder = OpenAIEmbedder(server.url, "hash-24", dim=32)
        with pytest.raises(EmbedderDimensionError, match="24-d"):
            await asyncio.to_thread(embedder.warm_up)


async def test_an_unreachable_server_is_refused_at_start(tmp_path: Path) -> None:
    async with embedding_server() as server:
        url = server.url  # closed when the block ends: nothing listens there any more
    settings = Settings(
        storage={"data_dir": tmp_path / "data"},
        embedder={"provider": "openai", "base_url": url, "model": "hash-32", "attempts": 1},
    )
    with pytest.raises(EmbedderUnavailableError):
        await open_stores(settings)


async def test_a_collection_of_another_model_is_refused_at_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = await open_stores(Settings(storage={"data_dir": data}))  # USE, 512-d
    await first.close()
    async with embedding_server(dim=32) as server:
        other = {"provider": "openai", "base_url": server.url, "model": "hash-32"}
        with pytest.raises(EmbeddingModelMismatchError, match="use-multilingual-v3"):
            await open_stores(Settings(storage={"data_dir": data}, embedder=other))
        # Same dimension, another model: refused all the same (the dimension check alone misses it).
        same_dim = {"provider": "openai", "base_url": server.url, "model": "hash-32-other", "dim": 32}
        moved = await open_stores(
            Settings(storage={"data_dir": data, "collection": "hash_vectors"}, embedder=other)
        )
        await moved.close()
        with pytest.raises(EmbeddingModelMismatchError, match="hash-32"):
            await open_stores(
                Settings(storage={"data_dir": data, "collection": "hash_vectors"}, embedder=same_dim)
            )


def test_settings_build_the_openai_embedder() -> None:
    settings = Settings(
        embedder={"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "bge-m3", "dim": 1024}
    )
    embedder = build_embedder(settings.embedder)
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.model_name, embedder.dim) == ("bge-m3", 1024)
    with pytest.raises(ValueError, match="base_url"):
        Settings(embedder={"provider": "openai", "model": "bge-m3"})
