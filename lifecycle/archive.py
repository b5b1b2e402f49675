"""The cold archive (L2): archived memories' content and vector, one encrypted object per memory.

Objects are grouped per user under a hashed prefix (no user id in a path or bucket key) and sealed
with the user's data key, so shredding the key makes the user's archive unreadable at once
(DESIGN decision 9). The object store is an interface: a local directory by default, any
S3-compatible bucket by configuration, its client injected through the constructor.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from engram.models.settings import Settings
from engram.storage.crypto import ContentCipher


class ObjectStore(Protocol):
    """A flat key -> bytes store (keys use ``/`` as a separator)."""

    async def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``, replacing what was there."""
        ...

    async def get(self, key: str) -> bytes | None:
        """The bytes under ``key``, or None."""
        ...

    async def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error."""
        ...

    async def keys(self, prefix: str) -> list[str]:
        """Every key starting with ``prefix``."""
        ...


class LocalDirObjectStore:
    """Objects as files under one directory; writes are atomic (temporary file, then rename)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        if ".." in key.split("/") or key.startswith("/"):
            raise ValueError("object keys are relative and never climb out of the archive")
        return self.root / key

    async def put(self, key: str, data: bytes) -> None:
        await asyncio.to_thread(self._put, self._path(key), data)

    @staticmethod
    def _put(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    async def get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            return None

    async def delete(self, key: str) -> None:
        await asyncio.to_thread(self._path(key).unlink, missing_ok=True)

    async def keys(self, prefix: str) -> list[str]:
        return await asyncio.to_thread(self._keys, prefix)

    def _keys(self, prefix: str) -> list[str]:
        folder = self._path(prefix.rstrip("/")) if prefix.endswith("/") else self._path(prefix).parent
        if not folder.is_dir():
            return []
        found = [
            path.relative_to(self.root).as_posix()
            for path in folder.rglob("*")
            if path.is_file() and not path.name.endswith(".tmp")
        ]
        return sorted(k for k in found if k.startswith(prefix))


class S3ObjectStore:
    """Objects in an S3-compatible bucket through an injected boto3-style client (sync calls).

    The client needs ``put_object``, ``get_object``, ``delete_object`` and ``list_objects_v2``;
    calls run in a worker thread so the event loop never blocks.
    """

    def __init__(self, client: Any, bucket: str, prefix: str = "") -> None:
        if not bucket:
            raise ValueError("an S3 archive needs a bucket")
        self._client = client
        self._bucket = bucket
        self._prefix = prefix

    async def put(self, key: str, data: bytes) -> None:
        await asyncio.to_thread(
            self._client.put_object, Bucket=self._bucket, Key=self._prefix + key, Body=data
        )

    async def get(self, key: str) -> bytes | None:
        return await asyncio.to_thread(self._get, self._prefix + key)

    def _get(self, key: str) -> bytes | None:
        try:
            response = self._client.get_object(Bucket=self._bucket, Key=key)
        except Exception as exc:
            if _is_missing(exc):
                return None
            raise
        body: bytes = response["Body"].read()
        return body

    async def delete(self, key: str) -> None:
        await asyncio.to_thread(self._client.delete_object, Bucket=self._bucket, Key=self._prefix + key)

    async def keys(self, prefix: str) -> list[str]:
        return await asyncio.to_thread(self._keys, self._prefix + prefix)

    def _keys(self, prefix: str) -> list[str]:
        found: list[str] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            page = self._client.list_objects_v2(**kwargs)
            found.extend(str(item["Key"])[len(self._prefix) :] for item in page.get("Contents", []))
            if not page.get("IsTruncated"):
                return sorted(found)
            token = page.get("NextContinuationToken")


def _is_missing(exc: Exception) -> bool:
    # botocore's ClientError carries the S3 error code; NoSuchKey is the only "absent" answer.
    response = getattr(exc, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return code in ("NoSuchKey", "404") or type(exc).__name__ == "NoSuchKey"


@dataclass(frozen=True, slots=True)
class ArchivedItem:
    """What the archive holds of one memory."""

    memory_id: str
    content: str
    vector: np.ndarray


def user_prefix(user_id: str) -> str:
    """The object-key folder of one user: an unkeyed SHA-256, so keys never show user ids (a guessed id
    can still be confirmed by whoever lists the bucket)."""
    return hashlib.sha256(user_id.encode()).hexdigest()[:32] + "/"


class ColdArchive:
    """Archived memories of every user in an ``ObjectStore``, sealed with each user's cipher."""

    def __init__(self, objects: ObjectStore) -> None:
        self.objects = objects

    @staticmethod
    def key(user_id: str, memory_id: str) -> str:
        """The object key of one archived memory."""
        return f"{user_prefix(user_id)}{memory_id}"

    async def put(self, cipher: ContentCipher, user_id: str, item: ArchivedItem) -> None:
        """Store one memory's content and vector (idempotent: a replay overwrites the same object)."""
        vector = np.asarray(item.vector, dtype=np.float32)
        body = json.dumps(
            {
                "memory_id": item.memory_id,
                "content": item.content,
                "vector": base64.b64encode(vector.tobytes()).decode(),
            }
        )
        await self.objects.put(self.key(user_id, item.memory_id), cipher.encrypt(body))

    async def get(self, cipher: ContentCipher, user_id: str, memory_id: str) -> ArchivedItem | None:
        """One archived memory, or None when absent or unreadable (its user's key was shredded)."""
        blob = await self.objects.get(self.key(user_id, memory_id))
        if blob is None:
            return None
        body = cipher.decrypt(blob)
        if body is None:
            return None
        data = json.loads(body)
        vector = np.frombuffer(base64.b64decode(data["vector"]), dtype=np.float32).copy()
        return ArchivedItem(memory_id=data["memory_id"], content=data["content"], vector=vector)

    async def delete(self, user_id: str, memory_ids: Sequence[str]) -> None:
        """Remove these memories' objects (missing ones are ignored)."""
        for memory_id in memory_ids:
            await self.objects.delete(self.key(user_id, memory_id))

    async def memory_ids(self, user_id: str) -> set[str]:
        """Ids of every memory of the user held in the archive."""
        prefix = user_prefix(user_id)
        return {key[len(prefix) :] for key in await self.objects.keys(prefix)}


def build_archive(settings: Settings, *, s3_client: Any = None) -> ColdArchive:
    """The archive named by ``settings.lifecycle.archive``; the S3 client is built when not given."""
    config = settings.lifecycle.archive
    if config.backend == "local":
        root = Path(config.local_dir) if config.local_dir else settings.storage.data_dir / "archive"
        return ColdArchive(LocalDirObjectStore(root))
    if s3_client is None:
        try:
            import boto3  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:  # the optional [s3] extra
            raise RuntimeError("the S3 archive needs boto3: pip install 'engram[s3]'") from exc
        s3_client = boto3.client(
            "s3", endpoint_url=config.s3_endpoint_url or None, region_name=config.s3_region or None
        )
    return ColdArchive(S3ObjectStore(s3_client, config.s3_bucket, config.s3_prefix))
