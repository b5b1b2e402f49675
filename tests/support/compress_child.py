"""A child process that compresses user u1 and stops dead at one step, waiting to be killed (L5).

``python -m tests.support.compress_child DATA_DIR ARCHIVE_DIR NOW STEP``: opens the stores of
DATA_DIR, runs the compression as of NOW (ISO 8601), prints ``at STEP`` when it reaches STEP and
then waits forever (inside the metadata transaction for the steps taken there), so the test's
kill -9 lands exactly there.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import datetime
from pathlib import Path

from engram.lifecycle.archive import ColdArchive, LocalDirObjectStore
from engram.lifecycle.compression import Compressor
from engram.lifecycle.context import LifecycleStores
from engram.models.settings import Settings
from engram.storage.stores import open_stores


async def main(data_dir: str, archive_dir: str, now: str, step: str) -> None:
    """Compress u1 until ``step``, then hold."""
    settings = Settings(storage={"data_dir": Path(data_dir)}, embedder={"threads": 1})
    stores = await open_stores(settings)
    archive = ColdArchive(LocalDirObjectStore(Path(archive_dir)))
    lifecycle = LifecycleStores(settings, stores.metadata, stores.vectors, stores.embedder, archive)

    async def hold(name: str) -> None:
        if name == step:
            print(f"at {name}", flush=True)
            await asyncio.Event().wait()  # never set: the parent kills this process here

    await Compressor(lifecycle, on_step=hold).compress_user("u1", datetime.fromisoformat(now))
    print("finished", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
