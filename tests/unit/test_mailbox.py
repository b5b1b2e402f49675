"""Per-user mailboxes: order, no overlap within a user, parallelism across users, passivation."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.actors.mailbox import MailboxClosedError, MailboxHost

pytestmark = pytest.mark.unit

# Only a guard against a hung test; no assertion depends on timing.
GUARD_S = 10


class FakeClock:
    """Monotonic seconds moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Tracker:
    """Records, per user, the order work ran in and the most work that ever ran at once."""

    def __init__(self) -> None:
        self.order: dict[str, list[int]] = defaultdict(list)
        self.running: dict[str, int] = defaultdict(int)
        self.max_running: dict[str, int] = defaultdict(int)
        self.total_running = 0
        self.max_total = 0

    def work(self, user: str, index: int, yields: int = 1) -> Callable[[], Awaitable[int]]:
        async def run() -> int:
            self.running[user] += 1
            self.total_running += 1
            self.max_running[user] = max(self.max_running[user], self.running[user])
            self.max_total = max(self.max_total, self.total_running)
            for _ in range(yields):
                await asyncio.sleep(0)  # hand the loop to others mid-work
            self.order[user].append(index)
            self.running[user] -= 1
            self.total_running -= 1
            return index

        return run


async def test_submit_returns_results_in_each_users_order_without_overlap() -> None:
    host = MailboxHost(reap_every_s=0)
    tracker = Tracker()
    calls = [
        host.submit(user, tracker.work(user, i, yields=3)) for i in range(30) for user in ("a", "b", "c")
    ]
    results = await asyncio.wait_for(asyncio.gather(*calls), GUARD_S)
    assert results == [i for i in range(30) for _ in range(3)]
    assert all(tracker.order[u] == list(range(30)) for u in "abc")
    assert all(tracker.max_running[u] == 1 for u in "abc")
    assert tracker.max_total > 1  # the users did run side by side
    assert host.processed == 90 and host.failed == 0
    await host.close()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("uvwxyz"), st.integers(0, 3), st.booleans()), min_size=1, max_size=60)
)
def test_any_interleaving_keeps_per_user_order_and_never_overlaps(
    script: list[tuple[str, int, bool]],
) -> None:
    async def scenario() -> None:
        host = MailboxHost(reap_every_s=0)
        tracker = Tracker()
        results: list[int] = []

        async def submit_and_wait(user: str, work: Callable[[], Awaitable[int]]) -> None:
            results.append(await host.submit(user, work))

        async def submit_nowait(user: str, work: Callable[[], Awaitable[int]]) -> None:
            host.submit_nowait(user, work)

        # One caller task per submission, started in script order (the order they enqueue in).
        callers = [
            asyncio.create_task(
                (submit_and_wait if wait else submit_nowait)(user, tracker.work(user, i, yields))
            )
            for i, (user, yields, wait) in enumerate(script)
        ]
        await asyncio.gather(*callers)
        await host.drain()
        assert sorted(results) == [i for i, (_, _, wait) in enumerate(script) if wait]
        for user in {u for u, _, _ in script}:
            assert tracker.order[user] == [i for i, (u, _, _) in enumerate(script) if u == user]
            assert tracker.max_running[user] == 1
        assert host.processed == len(script) and host.pending == 0
        await host.close()

    asyncio.run(asyncio.wait_for(scenario(), GUARD_S))


async def test_users_run_in_parallel() -> None:
    host = MailboxHost(reap_every_s=0)
    b_ran = asyncio.Event()

    async def a_waits_for_b() -> str:
        await b_ran.wait()  # would never finish if b queued behind a
        return "a"

    async def b_sets() -> str:
        b_ran.set()
        return "b"

    a = asyncio.ensure_future(host.submit("a", a_waits_for_b))
    assert await asyncio.wait_for(host.submit("b", b_sets), GUARD_S) == "b"
    assert await asyncio.wait_for(a, GUARD_S) == "a"
    await host.close()


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def test_errors_go_to_their_submitter_and_the_mailbox_survives() -> None:
    host = MailboxHost(reap_every_s=0)
    records = _Records()
    logger = logging.getLogger("engram.actors.mailbox")
    logger.addHandler(records)
    logger.setLevel(logging.WARNING)

    async def boom() -> None:
        raise ValueError("my secret diagnosis")

    async def fine() -> str:
        return "ok"

    try:
        with pytest.raises(ValueError, match="secret"):
            await host.submit("a", boom)
        host.submit_nowait("a", boom)
        assert await host.submit("a", fine) == "ok"
        assert await host.submit("b", fine) == "ok"
    finally:
        logger.removeHandler(records)
    assert (host.processed, host.failed) == (2, 2)
    # Fire-and-forget failures are logged by type and user id, never with their message.
    assert records.messages == ["background work failed for user a: ValueError"]
    await host.close()


async def test_a_cancelled_submit_skips_work_that_had_not_started() -> None:
    host = MailboxHost(reap_every_s=0)
    release = asyncio.Event()
    ran: list[str] = []

    async def blocker() -> None:
        await release.wait()
        ran.append("blocker")

    async def skipped() -> None:
        ran.append("skipped")

    host.submit_nowait("a", blocker)
    waiting = asyncio.ensure_future(host.submit("a", skipped))
    await asyncio.sleep(0)  # let the submit enqueue before it is cancelled
    waiting.cancel()
    release.set()
    await asyncio.wait_for(host.drain(), GUARD_S)
    assert ran == ["blocker"]
    await host.close()


async def test_idle_mailboxes_are_passivated_and_come_back_on_the_next_submit() -> None:
    clock = FakeClock()
    gone: list[str] = []
    host = MailboxHost(idle_s=60, reap_every_s=0, clock=clock, on_passivate=gone.append)
    release = asyncio.Event()

    async def held() -> str:
        await release.wait()
        return "held"

    async def quick() -> str:
        return "quick"

    assert await host.submit("idle", quick) == "quick"
    busy = asyncio.ensure_future(host.submit("busy", held))
    await asyncio.sleep(0)
    assert host.active_mailboxes == 2
    assert await host.passivate_idle(clock.now + 59) == 0  # not idle long enough yet
    assert await host.passivate_idle(clock.now + 3600) == 1  # "busy" has work in flight
    assert gone == ["idle"] and host.active_mailboxes == 1 and host.passivated == 1
    release.set()
    assert await asyncio.wait_for(busy, GUARD_S) == "held"
    clock.now += 61
    assert await host.passivate_idle() == 1
    assert gone == ["idle", "busy"] and host.active_mailboxes == 0
    assert await host.submit("idle", quick) == "quick"  # re-activated
    assert host.active_mailboxes == 1
    await host.close()
    assert host.active_mailboxes == 0


async def test_the_periodic_pass_passivates_on_its_own() -> None:
    passivated = asyncio.Event()
    host = MailboxHost(idle_s=0.001, reap_every_s=0.001, on_passivate=lambda _: passivated.set())

    async def quick() -> None:
        return None

    await host.submit("a", quick)
    await asyncio.wait_for(passivated.wait(), GUARD_S)
    assert host.active_mailboxes == 0 and host.passivated == 1
    await host.close()


async def test_ten_thousand_mailboxes_come_and_go_without_leaking_tasks() -> None:
    clock = FakeClock()
    host = MailboxHost(idle_s=1, reap_every_s=0, clock=clock)
    baseline = len(asyncio.all_tasks())
    done = 0

    async def count() -> None:
        nonlocal done
        done += 1

    for round_ in range(2):
        for i in range(10_000):
            host.submit_nowait(f"user-{i}", count)
        await asyncio.wait_for(host.drain(), GUARD_S * 3)
        assert host.active_mailboxes == 10_000
        assert len(asyncio.all_tasks()) == baseline + 10_000
        clock.now += 2
        assert await host.passivate_idle() == 10_000
        assert host.active_mailboxes == 0
        assert len(asyncio.all_tasks()) == baseline, f"round {round_} leaked tasks"
    assert done == 20_000 and host.processed == 20_000 and host.passivated == 20_000
    await host.close()


async def test_close_finishes_queued_work_then_refuses_more() -> None:
    host = MailboxHost()
    finished: list[int] = []

    def work(i: int) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            await asyncio.sleep(0)
            finished.append(i)

        return run

    for i in range(5):
        host.submit_nowait("a", work(i))
    await asyncio.wait_for(host.close(), GUARD_S)
    assert finished == [0, 1, 2, 3, 4]
    assert host.active_mailboxes == 0
    with pytest.raises(MailboxClosedError):
        host.submit_nowait("a", work(5))


async def test_abort_stops_running_and_queued_work_and_refuses_more() -> None:
    host = MailboxHost(reap_every_s=0)
    started = asyncio.Event()
    never = asyncio.Event()
    ran: list[str] = []

    async def stuck() -> None:
        started.set()
        await never.wait()  # a task waiting on a dependency that never comes
        ran.append("stuck finished")

    async def later() -> str:
        ran.append("later")
        return "later"

    host.submit_nowait("u1", stuck)
    waiting = asyncio.ensure_future(host.submit("u1", later))
    await asyncio.wait_for(started.wait(), GUARD_S)
    await asyncio.sleep(0)  # ``waiting`` queues its item behind the stuck one
    assert host.pending == 2
    dropped = await asyncio.wait_for(host.abort(), GUARD_S)
    assert dropped == 1
    assert ran == []
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting, GUARD_S)
    assert host.pending == 0 and host.active_mailboxes == 0
    await asyncio.wait_for(host.drain(), GUARD_S)  # nothing left to wait for
    with pytest.raises(MailboxClosedError):
        host.submit_nowait("u1", later)
