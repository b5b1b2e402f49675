"""The S3 cold archive against a real S3-compatible server (moto's server mode) through boto3."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from engram.lifecycle.archive import ColdArchive, S3ObjectStore, build_archive, user_prefix
from engram.models.settings import Settings
from tests.support.archive import cipher, item, roundtrip
from tests.support.net import free_port

pytestmark = pytest.mark.integration

BUCKET = "engram-archive-test"


@pytest.fixture
def s3_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    from moto.server import ThreadedMotoServer

    # Credentials of the throwaway local server, never real ones.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
        yield Settings(
            lifecycle={
                "archive": {
                    "backend": "s3",
                    "s3_bucket": BUCKET,
                    "s3_prefix": "engram/",
                    "s3_endpoint_url": endpoint,
                    "s3_region": "us-east-1",
                }
            }
        )
    finally:
        server.stop()


async def test_the_archive_round_trips_through_a_real_s3_server(s3_settings: Settings) -> None:
    archive = build_archive(s3_settings)  # boto3's own client, over HTTP
    assert isinstance(archive.objects, S3ObjectStore)
    await roundtrip(archive)
    keys = await archive.objects.keys("")
    assert keys and all(k.startswith(user_prefix("alice")) or k.startswith(user_prefix("bob")) for k in keys)


async def test_listing_pages_past_a_thousand_objects(s3_settings: Settings) -> None:
    archive: ColdArchive = build_archive(s3_settings)
    owner = cipher("many")
    ids = [f"m{n:05d}" for n in range(1105)]  # S3 lists at most 1,000 keys a page
    await asyncio.gather(*(archive.put(owner, "many", item(mid)) for mid in ids))
    assert await archive.memory_ids("many") == set(ids)
    await archive.delete("many", ids[:600])
    assert await archive.memory_ids("many") == set(ids[600:])


async def test_a_missing_object_reads_as_absent_and_deletes_quietly(s3_settings: Settings) -> None:
    archive = build_archive(s3_settings)
    assert await archive.get(cipher("nobody"), "nobody", "m1") is None
    await archive.delete("nobody", ["m1"])
    assert await archive.memory_ids("nobody") == set()
