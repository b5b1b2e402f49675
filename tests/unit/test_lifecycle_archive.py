"""The cold archive: encrypted per-user objects on a local directory or an S3-compatible store."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lifecycle.archive import (
    ArchivedItem,
    ColdArchive,
    LocalDirObjectStore,
    S3ObjectStore,
    build_archive,
    user_prefix,
)
from models.settings import Settings
from storage.crypto import ContentCipher

pytestmark = pytest.mark.unit


class NoSuchKeyError(Exception):
    """What botocore raises for a missing key (code NoSuchKey)."""

    def __init__(self) -> None:
        super().__init__("NoSuchKey")
        self.response = {"Error": {"Code": "NoSuchKey"}}


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self) -> bytes:
        return self._data


class InMemoryS3:
    """The four calls of a boto3 S3 client the archive uses, paging lists by two keys."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}

    def put_object(self, *, Bucket: str, Key: str, Body: bytes) -> dict[str, Any]:  # noqa: N803
        self.objects[(Bucket, Key)] = Body
        return {}

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:  # noqa: N803
        if (Bucket, Key) not in self.objects:
            raise NoSuchKeyError
        return {"Body": _Body(self.objects[(Bucket, Key)])}

    def delete_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:  # noqa: N803
        self.objects.pop((Bucket, Key), None)
        return {}

    def list_objects_v2(self, *, Bucket: str, Prefix: str, ContinuationToken: str = "0") -> dict[str, Any]:  # noqa: N803
        keys = sorted(k for b, k in self.objects if b == Bucket and k.startswith(Prefix))
        start = int(ContinuationToken)
        page = keys[start : start + 2]
        more = start + 2 < len(keys)
        return {
            "Contents": [{"Key": k} for k in page],
            "IsTruncated": more,
            "NextContinuationToken": str(start + 2),
        }


def cipher(user_id: str) -> ContentCipher:
    return ContentCipher(user_id, os.urandom(32))


def item(memory_id: str) -> ArchivedItem:
    return ArchivedItem(memory_id, f"content of {memory_id}", np.arange(8, dtype=np.float32) / 7)


async def _roundtrip(archive: ColdArchive) -> None:
    alice, bob = cipher("alice"), cipher("bob")
    for mid in ("a1", "a2", "a3"):
        await archive.put(alice, "alice", item(mid))
    await archive.put(bob, "bob", item("b1"))
    got = await archive.get(alice, "alice", "a2")
    assert got is not None and got.content == "content of a2"
    np.testing.assert_array_equal(got.vector, item("a2").vector)
    assert await archive.memory_ids("alice") == {"a1", "a2", "a3"}
    assert await archive.memory_ids("bob") == {"b1"}
    # Sealed with the owner's key: another key (a shredded one) reads nothing.
    assert await archive.get(cipher("alice"), "alice", "a2") is None
    await archive.delete("alice", ["a1", "a2", "missing"])
    assert await archive.memory_ids("alice") == {"a3"}
    assert await archive.get(alice, "alice", "a1") is None


async def test_local_directory_archive(tmp_path: Path) -> None:
    archive = ColdArchive(LocalDirObjectStore(tmp_path / "archive"))
    await _roundtrip(archive)
    files = [p for p in (tmp_path / "archive").rglob("*") if p.is_file()]
    assert all("alice" not in str(p) and b"content of" not in p.read_bytes() for p in files)
    assert user_prefix("alice") != user_prefix("bob")


async def test_local_keys_refuse_to_climb_out(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="never climb out"):
        await LocalDirObjectStore(tmp_path).put("../x", b"")


async def test_s3_archive_through_an_injected_client() -> None:
    client = InMemoryS3()
    archive = ColdArchive(S3ObjectStore(client, "bucket", "engram/"))
    await _roundtrip(archive)
    assert all(key.startswith("engram/") for _, key in client.objects)


def test_build_archive_from_settings(tmp_path: Path) -> None:
    local = build_archive(Settings(storage={"data_dir": tmp_path}))
    assert isinstance(local.objects, LocalDirObjectStore)
    assert local.objects.root == tmp_path / "archive"
    settings = Settings(lifecycle={"archive": {"backend": "s3", "s3_bucket": "b", "s3_prefix": "p/"}})
    s3 = build_archive(settings, s3_client=InMemoryS3())
    assert isinstance(s3.objects, S3ObjectStore)
    with pytest.raises(ValueError, match="needs a bucket"):
        S3ObjectStore(InMemoryS3(), "")
