"""The cold archive on a local directory; the S3 store is tested against a real S3-compatible
server in tests/integration/test_archive_s3.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.lifecycle.archive import (
    ColdArchive,
    LocalDirObjectStore,
    S3ObjectStore,
    build_archive,
    user_prefix,
)
from engram.models.settings import Settings
from tests.support.archive import roundtrip

pytestmark = pytest.mark.unit


async def test_local_directory_archive(tmp_path: Path) -> None:
    archive = ColdArchive(LocalDirObjectStore(tmp_path / "archive"))
    await roundtrip(archive)
    files = [p for p in (tmp_path / "archive").rglob("*") if p.is_file()]
    assert all("alice" not in str(p) and b"content of" not in p.read_bytes() for p in files)
    assert user_prefix("alice") != user_prefix("bob")


async def test_local_keys_refuse_to_climb_out(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="never climb out"):
        await LocalDirObjectStore(tmp_path).put("../x", b"")


def test_build_archive_from_settings(tmp_path: Path) -> None:
    local = build_archive(Settings(storage={"data_dir": tmp_path}))
    assert isinstance(local.objects, LocalDirObjectStore)
    assert local.objects.root == tmp_path / "archive"
    settings = Settings(lifecycle={"archive": {"backend": "s3", "s3_bucket": "b", "s3_prefix": "p/"}})
    s3 = build_archive(settings, s3_client=object())
    assert isinstance(s3.objects, S3ObjectStore)
    with pytest.raises(ValueError, match="needs a bucket"):
        S3ObjectStore(object(), "")
