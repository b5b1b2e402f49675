"""HitBuffer: recall hits leave a recall process in batches, in order, and never fail a recall."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

import pytest

from engram.actors.hit_buffer import HitBuffer, RecallHits

pytestmark = pytest.mark.unit

AT = datetime(2026, 1, 1, tzinfo=UTC)


class Recorder:
    def __init__(self) -> None:
        self.batches: list[list[RecallHits]] = []
        self.arrived = asyncio.Event()

    async def send(self, batch: list[RecallHits]) -> None:
        self.batches.append(batch)
        self.arrived.set()


async def test_hits_wait_for_the_flush_and_go_in_one_batch_in_order() -> None:
    recorder = Recorder()
    buffer = HitBuffer(recorder.send, flush_after_s=3600, max_batch=100)
    buffer.add("u1", ["a", "b"], AT)
    buffer.add("u2", ["c"], AT)
    buffer.add("u3", [], AT)  # nothing hit: nothing to count
    assert recorder.batches == [] and buffer.pending == 2
    await buffer.flush()
    assert recorder.batches == [[RecallHits("u1", ("a", "b"), AT), RecallHits("u2", ("c",), AT)]]
    assert buffer.pending == 0


async def test_a_full_batch_is_sent_without_waiting_for_the_timer() -> None:
    recorder = Recorder()
    buffer = HitBuffer(recorder.send, flush_after_s=3600, max_batch=3)
    for user in ("u1", "u2", "u3"):
        buffer.add(user, ["m"], AT)
    await asyncio.wait_for(recorder.arrived.wait(), timeout=10)
    assert [h.user_id for h in recorder.batches[0]] == ["u1", "u2", "u3"]
    await buffer.flush()
    assert len(recorder.batches) == 1


async def test_the_timer_sends_what_is_waiting() -> None:
    recorder = Recorder()
    buffer = HitBuffer(recorder.send, flush_after_s=0.001, max_batch=100)
    buffer.add("u1", ["m"], AT)
    await asyncio.wait_for(recorder.arrived.wait(), timeout=10)
    assert recorder.batches == [[RecallHits("u1", ("m",), AT)]]


async def test_a_failed_send_is_logged_without_ids(caplog: pytest.LogCaptureFixture) -> None:
    async def broken(batch: list[RecallHits]) -> None:
        raise ConnectionError("shard unreachable")

    buffer = HitBuffer(broken, flush_after_s=3600, max_batch=100)
    buffer.add("secret-user", ["secret-memory"], AT)
    with caplog.at_level(logging.WARNING):
        await buffer.flush()
    assert "dropped 1 recall hits" in caplog.text
    assert "secret" not in caplog.text
    assert buffer.pending == 0
