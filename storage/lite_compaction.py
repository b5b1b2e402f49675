"""Compaction of the embedded milvus-lite collection: deleted vectors leave its files (P8).

milvus-lite 3.2 deletes by tombstone: a deleted row's vector stays in its segment's parquet file
and FLAT index sidecar until an automatic compaction happens to merge that file (four files of a
size bucket, or more than 32 files), and pymilvus' ``compact()`` is a no-op there. A purged user's
vectors would so stay on disk indefinitely. This rewrites every segment file that holds a deleted
row (the engine's own compaction step, one file at a time, so memory stays bounded by a segment),
drops the tombstones no file needs any more and the index sidecars of the replaced files.

It reaches into milvus-lite's engine (pinned to the 3.2 line in pyproject.toml): only the process
that owns the ``.db`` directory holds that engine; elsewhere it does nothing and says so.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]  # milvus-lite's own dependency


def _owned_collection(uri: str, collection: str) -> Any | None:
    """The engine's collection object when this process serves ``uri``, else None."""
    try:
        from milvus_lite.server_manager import server_manager_instance
    except ImportError:  # another milvus-lite line (2.5's C++ server): nothing to reach
        return None
    entry = server_manager_instance._servers.get(os.path.abspath(uri))
    if entry is None:
        return None
    _server, db, _port = entry
    return db.get_collection(collection)


def _holds_deleted(path: str, pk: str, deleted: Any) -> bool:
    table = pq.read_table(path, columns=[pk, "_seq"])
    keys = table.column(pk).to_pylist()
    seqs = table.column("_seq").to_pylist()
    return any(deleted.is_deleted(key, seq) for key, seq in zip(keys, seqs, strict=True))


def compact_lite(uri: str, collection: str, pk: str = "memory_id") -> int | None:
    """Rewrite the segment files of ``collection`` holding deleted rows; how many were rewritten.

    None when this process does not own the milvus-lite directory (nothing was done).
    """
    coll = _owned_collection(uri, collection)
    if coll is None:
        return None
    coll.flush()  # tombstones and rows still in the memtable reach files first
    coll._wait_for_bg()  # the engine's own background compaction must not run beside this one
    rewritten = 0
    with coll._maintenance_lock:
        manifest = coll._manifest
        deleted = coll._delta_index
        if len(deleted) == 0:
            return 0
        for partition in manifest.list_partitions():
            folder = os.path.join(coll._data_dir, "partitions", partition)
            dirty = [
                name
                for name in manifest.get_data_files(partition)
                if _holds_deleted(os.path.join(folder, name), pk, deleted)
            ]
            for name in dirty:
                coll._compaction_mgr._compact_files(partition, folder, [name], manifest, deleted)
                rewritten += 1
        if rewritten:
            coll._compaction_mgr._gc_tombstones(manifest, deleted)
            coll._refresh_segment_cache()
            coll._cleanup_orphan_index_files()
    if rewritten:
        coll._ensure_loaded_segments_indexed()  # the rewritten segments get their FLAT index
    return rewritten
