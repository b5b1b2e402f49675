"""Which embedding model a vector collection holds, recorded beside the metadata (SPEC O2).

The first process to open a collection records its embedder's model and dimension; every later one
must bring the same, or it refuses to start: vectors of two models are never written side by side,
whatever their dimensions. A new model gets a collection of its own (``storage.collection``) and
``engram reembed`` moves the memories over (docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from engram.storage.metadata import MetadataStore
from engram.storage.schema import vector_collections


class EmbeddingModelMismatchError(RuntimeError):
    """The collection holds vectors of another embedding model (or dimension) than the embedder's."""


async def check_collection_model(
    metadata: MetadataStore, collection: str, model: str, dim: int, now: Callable[[], datetime]
) -> None:
    """Record ``model`` for a new ``collection``, or raise unless it is the model recorded there."""
    for _ in range(2):  # a second pass reads the row another process inserted first
        try:
            async with metadata.transaction() as tx:
                row = (
                    await tx.conn.execute(
                        select(vector_collections.c.embedding_model, vector_collections.c.dim).where(
                            vector_collections.c.collection == collection
                        )
                    )
                ).first()
                if row is None:
                    await tx.conn.execute(
                        insert(vector_collections).values(
                            collection=collection, embedding_model=model, dim=dim, created_at=now()
                        )
                    )
                    return
        except IntegrityError:
            continue
        if (row.embedding_model, row.dim) != (model, dim):
            raise EmbeddingModelMismatchError(
                f"vector collection {collection!r} holds {row.dim}-d vectors of embedding model "
                f"{row.embedding_model!r}, the embedder is {model!r} ({dim}-d): vectors of two models "
                "are never mixed. Give the new model a collection of its own (storage.collection) "
                "and run `engram reembed`; or put embedder back to the recorded model"
            )
        return
    raise EmbeddingModelMismatchError(f"vector collection {collection!r}: its model record could not be read")
