"""The vector store on a real Milvus standalone server, started by ``engram dev-services``.

The milvus-lite suite's tests of search, scopes, filters, deletes and upserts
(tests/integration/test_vectors.py) are imported and run here against the server through this
module's ``store`` fixture: the two back ends must agree. (The id and expression checks are the
same code on both and run once, there.)
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engram.storage.vectors import MilvusVectorStore
from tests.integration.test_vectors import (
    COLLECTION,
    DIM,
    test_delete_and_delete_user,
    test_ownership_and_mem_type_filters,
    test_scope_levels_and_users_never_leak,
    test_search_returns_nearest_first_with_cosine_scores,
    test_upsert_replaces_vector_and_scope,
)

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

__all__ = [
    "test_delete_and_delete_user",
    "test_ownership_and_mem_type_filters",
    "test_scope_levels_and_users_never_leak",
    "test_search_returns_nearest_first_with_cosine_scores",
    "test_upsert_replaces_vector_and_scope",
]


@pytest.fixture
async def store(milvus_uri: str) -> AsyncIterator[MilvusVectorStore]:
    from pymilvus import MilvusClient

    collection = f"{COLLECTION}_{uuid.uuid4().hex[:8]}"
    vectors = MilvusVectorStore(milvus_uri, collection, DIM)
    await vectors.start()
    yield vectors
    await vectors.close()
    client = MilvusClient(uri=milvus_uri)
    client.drop_collection(collection)
    client.close()


async def test_a_second_client_sees_the_first_ones_writes(milvus_uri: str, tmp_path: Path) -> None:
    # Shards and the sweep are separate processes: the server's Strong consistency makes one
    # process's upsert visible to the next read of any other.
    from tests.integration.test_vectors import rec

    collection = f"{COLLECTION}_{uuid.uuid4().hex[:8]}"
    writer, reader = (MilvusVectorStore(milvus_uri, collection, DIM) for _ in range(2))
    await writer.start()
    await reader.start()
    try:
        record = rec()
        await writer.upsert([record])
        assert await reader.memory_ids(record.user_id) == [record.memory_id]
        assert set(await reader.get_vectors([record.memory_id])) == {record.memory_id}
    finally:
        await writer.close()
        await reader.close()
