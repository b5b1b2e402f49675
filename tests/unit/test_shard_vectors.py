"""serve.shard_vectors: a recall replica's snapshot vectors never wait on one lost shard."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from engram.serve.shard_vectors import ShardVectors

pytestmark = pytest.mark.unit

VECTOR = np.ones(4, dtype=np.float32)


class Shard:
    """A shard's ``get_vectors``: answering, never answering (restarting), or failing (dead)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.asked = 0

    async def read(self, ids: list[str]) -> dict[str, np.ndarray]:
        self.asked += 1
        if self.mode == "hangs":
            await asyncio.Event().wait()
        if self.mode == "dead":
            raise RuntimeError("the actor died")
        return dict.fromkeys(ids, VECTOR)


async def test_a_shard_that_never_answers_is_passed_over_within_its_wait() -> None:
    restarting, live = Shard("hangs"), Shard("answers")
    vectors = ShardVectors([restarting.read, live.read], wait_s=0.05)
    found = await asyncio.wait_for(vectors.get_vectors(["m1"]), 5)
    assert list(found) == ["m1"]
    # The shard that answered is asked first from then on: the lost one costs no more waits.
    await asyncio.wait_for(vectors.get_vectors(["m2"]), 5)
    assert (restarting.asked, live.asked) == (1, 2)


@pytest.mark.parametrize("mode", ["hangs", "dead"])
async def test_no_shard_answering_gives_no_vectors_not_an_error(mode: str) -> None:
    # The snapshot then embeds what it lacks (actors.snapshot), so the recall still answers.
    only = Shard(mode)
    vectors = ShardVectors([only.read], wait_s=0.05)
    assert await asyncio.wait_for(vectors.get_vectors(["m1"]), 5) == {}


async def test_a_dead_shard_is_passed_over_at_once() -> None:
    dead, live = Shard("dead"), Shard("answers")
    found = await ShardVectors([dead.read, live.read], wait_s=60).get_vectors(["m1", "m2"])
    assert set(found) == {"m1", "m2"}
