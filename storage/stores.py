"""Opens every store a deployment needs from Settings, on the embedded default or servers."""

from __future__ import annotations

from dataclasses import dataclass

from engram.models.settings import Settings
from engram.storage.crypto import KeyProvider
from engram.storage.database import create_engine
from engram.storage.embedders import Embedder, build_embedder
from engram.storage.keyring import keyring_for
from engram.storage.metadata import MetadataStore
from engram.storage.migrate import upgrade
from engram.storage.reseal import reseal_plaintext
from engram.storage.vector_copies import CopyingVectorStore
from engram.storage.vectors import MilvusVectorStore, VectorStore


@dataclass
class Stores:
    """The metadata store, the vector store and the embedder of one process."""

    metadata: MetadataStore
    vectors: VectorStore
    embedder: Embedder

    async def close(self) -> None:
        """Close the vector store and release database connections."""
        await self.vectors.close()
        await self.metadata.close()


async def open_stores(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    key_provider: KeyProvider | None = None,
    migrate: bool = True,
) -> Stores:
    """Open (and by default migrate) the stores named by ``settings.storage``."""
    storage = settings.storage
    storage.data_dir.mkdir(parents=True, exist_ok=True)
    engine = create_engine(storage.resolved_database_url(), busy_timeout_ms=storage.sqlite_busy_timeout_ms)
    if migrate:
        await upgrade(engine)
    embedder = embedder or build_embedder(settings.embedder)
    metadata = MetadataStore(engine, keyring_for(storage, key_provider))
    if migrate:
        await reseal_plaintext(metadata)  # rows from before migration 0005, once
    index = MilvusVectorStore(
        storage.resolved_milvus_uri(),
        storage.collection,
        embedder.dim,
        token=storage.milvus_token,
        lite_flush_rows=storage.milvus_lite_flush_rows,
    )
    vectors = CopyingVectorStore(index, metadata)
    await vectors.start()
    return Stores(metadata, vectors, embedder)
