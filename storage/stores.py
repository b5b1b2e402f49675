"""Opens every store a deployment needs from Settings, on the embedded default or servers."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from engram.models.domain import utcnow
from engram.models.settings import Settings
from engram.storage.collection_models import check_collection_model
from engram.storage.crypto import KeyProvider
from engram.storage.database import create_engine
from engram.storage.embedders import Embedder, build_embedder
from engram.storage.keyring import check_master_key, keyring_for
from engram.storage.metadata import MetadataStore
from engram.storage.migrate import upgrade
from engram.storage.private_files import private_dir, private_umask
from engram.storage.reseal import reseal_plaintext
from engram.storage.task_backfill import backfill_task_reach
from engram.storage.vector_copies import CopyingVectorStore
from engram.storage.vectors import MilvusVectorStore, VectorStore


@dataclass
class Stores:
    """The metadata store, the vector store and the embedder of one process."""

    metadata: MetadataStore
    vectors: VectorStore
    embedder: Embedder

    async def close(self) -> None:
        """Close the vector store, release database connections and the embedder's, if it keeps any."""
        await self.vectors.close()
        await self.metadata.close()
        close_embedder = getattr(self.embedder, "close", None)
        if callable(close_embedder):
            await close_embedder()


async def open_stores(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    key_provider: KeyProvider | None = None,
    migrate: bool = True,
) -> Stores:
    """Open (and by default migrate) the stores named by ``settings.storage``."""
    storage = settings.storage
    # Everything the stores create from here on (database, WAL, vector segments, archive, exports,
    # the master key) is the service user's alone; a data dir left 0755 is tightened (P8).
    private_umask()
    private_dir(storage.data_dir)
    engine = create_engine(storage.resolved_database_url(), busy_timeout_ms=storage.sqlite_busy_timeout_ms)
    if migrate:
        await upgrade(engine)
    embedder = embedder or build_embedder(settings.embedder)
    warm_up = getattr(embedder, "warm_up", None)
    if callable(warm_up):
        # Loads the weights, or asks a remote embedder for its dimension (checked below).
        await asyncio.to_thread(warm_up)
    metadata = MetadataStore(
        engine, keyring_for(storage, key_provider), write_wait_s=storage.sqlite_busy_timeout_ms / 1000
    )
    # Before anything is sealed: a process without the master key the stored data keys were
    # wrapped under stops here, with the reason, instead of creating a second master key.
    async with engine.connect() as conn:
        await check_master_key(metadata.keyring, conn, may_create=True)
    if migrate:
        await reseal_plaintext(metadata)  # rows from before migration 0005, once
        await backfill_task_reach(metadata)  # tasks from before migration 0008, once
    await check_collection_model(metadata, storage.collection, embedder.model_name, embedder.dim, utcnow)
    index = MilvusVectorStore(
        storage.resolved_milvus_uri(),
        storage.collection,
        embedder.dim,
        token=storage.milvus_token.get_secret_value(),
        lite_flush_rows=storage.milvus_lite_flush_rows,
    )
    vectors = CopyingVectorStore(index, metadata)
    await vectors.start()
    return Stores(metadata, vectors, embedder)
