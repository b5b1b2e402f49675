"""Bulk seeding for load tests: N users x M memories written straight into the stores, offline.

Far faster than the API (one transaction per user, embeddings and vector upserts in batches); the
app must not be running on the same data directory (milvus-lite has one owner).
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections import Counter
from datetime import timedelta

from engram.models.domain import utcnow
from engram.models.enums import Level, MemType, OpSource, OpType, Ownership
from engram.models.hashing import content_hash
from engram.models.rules.capacity import counter_deltas
from engram.models.rules.records import new_memory
from engram.models.settings import Settings
from engram.storage.stores import open_stores
from engram.storage.vectors import vector_record

_SUBJECTS = [
    "pizza",
    "sushi",
    "tennis",
    "jazz",
    "Lisbon",
    "Kyoto",
    "hiking",
    "chess",
    "tea",
    "cycling",
    "Python",
    "painting",
    "the violin",
    "peanuts",
    "Berlin",
    "yoga",
    "tacos",
    "opera",
    "sailing",
    "Go",
]
_TEMPLATES = [
    "Likes {s}",
    "Travelled to {s} in spring",
    "Is learning {s}",
    "Avoids {s}",
    "Talks often about {s}",
    "Went to a {s} event with friends",
    "Wants to try more {s}",
    "Has a book about {s}",
]


def fact(rng: random.Random, n: int) -> str:
    """A synthetic, varied memory text."""
    return f"{rng.choice(_TEMPLATES).format(s=rng.choice(_SUBJECTS))} (note {n})"


async def seed(settings: Settings, users: int, memories: int, *, progress: bool = True) -> int:
    """Write ``users`` x ``memories`` memories for users lt-0 .. lt-(users-1); returns the count."""
    stores = await open_stores(settings)
    rng = random.Random(7)
    written = 0
    try:
        for u in range(users):
            user_id = f"lt-{u}"
            texts = [fact(rng, n) for n in range(memories)]
            vectors = await stores.embedder.embed(texts)
            now = utcnow()
            async with stores.metadata.transaction() as tx:
                key = (await tx.keys.cipher(user_id)).hash_key
                rows = [
                    new_memory(
                        settings.weights,
                        user_id=user_id,
                        app_id="",
                        level=Level.GLOBAL,
                        session_id=None,
                        ownership=Ownership.USER,
                        mem_type=MemType.SEMANTIC,
                        content=text,
                        content_hash=content_hash(text, key),
                        embedding_model=stores.embedder.model_name,
                        now=now - timedelta(days=rng.randrange(60)),
                    )
                    for text in texts
                ]
                deltas: Counter[str] = Counter()
                for row in rows:
                    await tx.memories.insert(row)
                    await tx.changes.add(
                        row, OpType.ADD, OpSource.SYSTEM, "load-test seed", now, content_after=row.content
                    )
                deltas.update(counter_deltas(rows, +1))
                await tx.counters.add(user_id, deltas)
                await tx.versions.bump(user_id)
            await stores.vectors.upsert([vector_record(r, vectors[i]) for i, r in enumerate(rows)])
            written += len(rows)
            if progress and (u + 1) % 50 == 0:
                print(f"seeded {u + 1}/{users} users ({written} memories)", file=sys.stderr, flush=True)
    finally:
        await stores.close()
    return written


def main() -> None:
    """``python -m engram.loadtest.seed DATA_DIR USERS MEMORIES``: seed in a process of its own.

    milvus-lite keeps its file lock for the life of the process that opened it, so seeding must not
    happen in the process that later starts the app.
    """
    data_dir, users, memories = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    settings = Settings(storage={"data_dir": data_dir})
    print(asyncio.run(seed(settings, users, memories)))


if __name__ == "__main__":
    main()
