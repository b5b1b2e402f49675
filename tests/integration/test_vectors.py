"""MilvusVectorStore against a real milvus-lite file: search, scope isolation, restart, injection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from engram.models.enums import Level, MemType, Ownership
from engram.models.ids import new_id
from engram.storage.vector_filters import VectorScope, scope_key
from engram.storage.vectors import MilvusVectorStore, VectorRecord, VectorStore

pytestmark = pytest.mark.integration

DIM = 8
COLLECTION = "memories"


def unit(*values: float) -> np.ndarray:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[: len(values)] = values
    normalised: np.ndarray = vector / np.linalg.norm(vector)
    return normalised


def rec(
    user: str = "alice",
    app: str = "",
    session: str | None = None,
    level: Level = Level.GLOBAL,
    ownership: Ownership = Ownership.USER,
    mem_type: MemType = MemType.SEMANTIC,
    vector: np.ndarray | None = None,
    memory_id: str | None = None,
) -> VectorRecord:
    return VectorRecord(
        memory_id=new_id() if memory_id is None else memory_id,
        user_id=user,
        app_id=app,
        session_id=session,
        level=level,
        ownership=ownership,
        mem_type=mem_type,
        vector=unit(1.0) if vector is None else vector,
    )


def scope(
    user: str = "alice",
    include_global: bool = True,
    app: str | None = None,
    session: str | None = None,
    ownerships: frozenset[Ownership] = frozenset(),
    mem_types: frozenset[MemType] = frozenset(),
) -> VectorScope:
    return VectorScope(user, include_global, app, session, ownerships, mem_types)


async def visible(store: MilvusVectorStore, search_scope: VectorScope) -> set[str]:
    return {memory_id for memory_id, _ in await store.search(unit(1.0), search_scope, 100)}


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MilvusVectorStore]:
    vectors = MilvusVectorStore(str(tmp_path / "nested" / "vectors.db"), COLLECTION, DIM)
    await vectors.start()
    yield vectors
    await vectors.close()


async def test_search_returns_nearest_first_with_cosine_scores(store: MilvusVectorStore) -> None:
    near, mid, far = rec(vector=unit(1.0, 0.1)), rec(vector=unit(1.0, 1.0)), rec(vector=unit(0.0, 1.0))
    await store.upsert([far, near, mid])

    hits = await store.search(unit(1.0), scope(), 10)

    assert [memory_id for memory_id, _ in hits] == [near.memory_id, mid.memory_id, far.memory_id]
    for (_, score), record in zip(hits, [near, mid, far], strict=True):
        assert score == pytest.approx(float(record.vector @ unit(1.0)), abs=1e-5)
    assert await store.count() == 3
    assert await store.search(unit(1.0), scope(), 2) == hits[:2]


async def test_limit_zero_and_empty_store_return_nothing(store: MilvusVectorStore) -> None:
    assert await store.search(unit(1.0), scope(), 10) == []
    await store.upsert([rec()])
    assert await store.search(unit(1.0), scope(), 0) == []
    assert await store.count() == 1


async def test_scope_levels_and_users_never_leak(store: MilvusVectorStore) -> None:
    rows = {
        "global": rec(),
        "app1": rec(app="app1", level=Level.APP),
        "app2": rec(app="app2", level=Level.APP),
        "s1_app1": rec(app="app1", session="s1", level=Level.SESSION),
        "s1_noapp": rec(session="s1", level=Level.SESSION),
        "s1_app2": rec(app="app2", session="s1", level=Level.SESSION),
        "s2_app1": rec(app="app1", session="s2", level=Level.SESSION),
        "bob_global": rec(user="bob"),
        "bob_app1": rec(user="bob", app="app1", level=Level.APP),
        "bob_s1": rec(user="bob", app="app1", session="s1", level=Level.SESSION),
    }
    await store.upsert(list(rows.values()))

    def ids(*names: str) -> set[str]:
        return {rows[name].memory_id for name in names}

    assert await visible(store, scope()) == ids("global")
    assert await visible(store, scope(include_global=False, app="app1")) == ids("app1")
    assert await visible(store, scope(app="app1", session="s1")) == ids(
        "global", "app1", "s1_app1", "s1_noapp"
    )
    # A session memory without an app is one of the user's global memories (P4, #27).
    assert await visible(store, scope(include_global=False, session="s1")) == set()
    assert await visible(store, scope(include_global=False, app="app1", session="s1")) == ids(
        "app1", "s1_app1"
    )
    assert await visible(store, scope(include_global=False, app="app2", session="s2")) == ids("app2")
    assert await visible(store, scope(include_global=False)) == set()
    assert await visible(store, scope(user="bob", app="app1", session="s1")) == ids(
        "bob_global", "bob_app1", "bob_s1"
    )
    assert await visible(store, scope(user="carol", app="app1", session="s1")) == set()
    assert await store.count("alice") == 7
    assert await store.count("bob") == 3


async def test_ownership_and_mem_type_filters(store: MilvusVectorStore) -> None:
    user_sem = rec()
    agent_sem = rec(ownership=Ownership.AGENT)
    user_proc = rec(mem_type=MemType.PROCEDURAL)
    agent_epi = rec(ownership=Ownership.AGENT, mem_type=MemType.EPISODIC)
    await store.upsert([user_sem, agent_sem, user_proc, agent_epi])

    agents = await visible(store, scope(ownerships=frozenset({Ownership.AGENT})))
    assert agents == {agent_sem.memory_id, agent_epi.memory_id}
    semantic = await visible(store, scope(mem_types=frozenset({MemType.SEMANTIC})))
    assert semantic == {user_sem.memory_id, agent_sem.memory_id}
    both = await visible(
        store,
        scope(
            ownerships=frozenset({Ownership.USER}),
            mem_types=frozenset({MemType.PROCEDURAL, MemType.EPISODIC}),
        ),
    )
    assert both == {user_proc.memory_id}


async def test_delete_and_delete_user(store: MilvusVectorStore) -> None:
    first, second, bobs = rec(), rec(), rec(user="bob")
    await store.upsert([first, second, bobs])

    await store.delete([first.memory_id, new_id()])
    assert await visible(store, scope()) == {second.memory_id}
    assert await store.get_vectors([first.memory_id]) == {}

    await store.delete_user("alice")
    assert await store.count("alice") == 0
    assert await visible(store, scope(user="bob")) == {bobs.memory_id}


async def test_upsert_replaces_vector_and_scope(store: MilvusVectorStore) -> None:
    memory_id = new_id()
    await store.upsert([rec(memory_id=memory_id, vector=unit(0.0, 1.0))])
    await store.upsert([rec(memory_id=memory_id, app="app1", level=Level.APP, vector=unit(1.0))])

    assert await store.count() == 1
    stored = await store.get_vectors([memory_id])
    np.testing.assert_allclose(stored[memory_id], unit(1.0), atol=1e-6)
    assert stored[memory_id].dtype == np.float32
    assert await visible(store, scope()) == set()
    hits = await store.search(unit(1.0), scope(include_global=False, app="app1"), 5)
    assert hits[0][0] == memory_id
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5)


async def test_restart_keeps_data_and_loads_collection(tmp_path: Path) -> None:
    uri = str(tmp_path / "vectors.db")
    record = rec(vector=unit(1.0, 0.5))
    first: VectorStore = MilvusVectorStore(uri, COLLECTION, DIM)
    await first.start()
    await first.upsert([record])
    await first.close()
    await first.close()

    reopened = MilvusVectorStore(uri, COLLECTION, DIM)
    await reopened.start()
    try:
        assert await reopened.count("alice") == 1
        hits = await reopened.search(unit(1.0), scope(), 5)
        assert [memory_id for memory_id, _ in hits] == [record.memory_id]
        assert set(await reopened.get_vectors([record.memory_id])) == {record.memory_id}
    finally:
        await reopened.close()


async def test_dim_mismatch_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "vectors.db")
    first = MilvusVectorStore(uri, COLLECTION, DIM)
    await first.start()
    await first.close()

    other = MilvusVectorStore(uri, COLLECTION, DIM * 2)
    with pytest.raises(RuntimeError, match=r"dim 8.*never be mixed"):
        await other.start()
    with pytest.raises(RuntimeError, match="not started"):
        await other.count()


CRAFTED = [
    '"',
    "'",
    '" || user_key != "',
    "x' or 1==1 or '",
    '"] or user_key != "',
    "\\",
    '\\" or true or \\"',
    'alice" or level == "GLOBAL',
    "user_key in [] or not (1 == 2)",
    "a\nb",
    "{user_id}",
    "",
]


@pytest.mark.parametrize("crafted", [c for c in CRAFTED if c])
async def test_crafted_user_id_is_literal_and_never_widens(store: MilvusVectorStore, crafted: str) -> None:
    victim = [
        rec(user="victim"),
        rec(user="victim", app="app1", level=Level.APP),
        rec(user="victim", app="app1", session="s1", level=Level.SESSION),
    ]
    own = rec(user=crafted, app="app1", session="s1", level=Level.SESSION)
    await store.upsert([*victim, own])

    seen = await visible(store, scope(user=crafted, app="app1", session="s1"))
    assert seen == {own.memory_id}
    assert await store.count(crafted) == 1
    assert await visible(store, scope(user="victim", app="app1", session="s1")) == {
        r.memory_id for r in victim
    }
    await store.delete_user(crafted)
    assert await store.count() == len(victim)


@pytest.mark.parametrize("crafted", CRAFTED)
async def test_crafted_app_and_session_ids_match_literally(store: MilvusVectorStore, crafted: str) -> None:
    plain_app = rec(app="app1", level=Level.APP)
    plain_session = rec(app="app1", session="s1", level=Level.SESSION)
    crafted_app = rec(app=crafted, level=Level.APP)
    crafted_session = rec(app=crafted, session=crafted, level=Level.SESSION)
    await store.upsert([plain_app, plain_session, crafted_app, crafted_session])

    seen = await visible(store, scope(include_global=False, app=crafted, session=crafted))
    if crafted:
        assert seen == {crafted_app.memory_id, crafted_session.memory_id}
    else:
        # An empty app or session id means "none given": nothing at those levels is visible.
        assert seen == set()
    assert await visible(store, scope(include_global=False, app="app1", session="s1")) == {
        plain_app.memory_id,
        plain_session.memory_id,
    }


def test_scope_key_is_a_short_hex_digest() -> None:
    key = scope_key('" or 1==1')
    assert len(key) == 32
    assert set(key) <= set("0123456789abcdef")
    assert key != scope_key("' or 1==1")


@pytest.mark.parametrize("bad_id", ["not-an-id", '" or 1==1', "A" * 32, "a" * 31, ""])
async def test_invalid_memory_ids_are_refused(store: MilvusVectorStore, bad_id: str) -> None:
    await store.upsert([rec()])
    with pytest.raises(ValueError, match="invalid memory id"):
        await store.delete([bad_id])
    with pytest.raises(ValueError, match="invalid memory id"):
        await store.get_vectors([new_id(), bad_id])
    with pytest.raises(ValueError, match="invalid memory id"):
        await store.upsert([rec(memory_id=bad_id)])
    assert await store.count() == 1


async def test_wrong_vector_shape_and_empty_user_are_refused(store: MilvusVectorStore) -> None:
    with pytest.raises(ValueError, match="finite"):
        await store.upsert([rec(vector=np.ones(DIM + 1, dtype=np.float32))])
    with pytest.raises(ValueError, match="finite"):
        await store.upsert([rec(vector=np.full(DIM, np.nan, dtype=np.float32))])
    with pytest.raises(ValueError, match="user_id"):
        await store.upsert([rec(user="")])
    with pytest.raises(ValueError, match="shape"):
        await store.search(np.ones(DIM + 1, dtype=np.float32), scope(), 5)
    assert await store.count() == 0


def test_lite_path_must_end_in_db(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.db"):
        MilvusVectorStore(str(tmp_path / "vectors"), COLLECTION, DIM)


async def test_writes_across_lite_flush_boundaries_survive_restart(tmp_path: Path) -> None:
    uri = str(tmp_path / "vectors.db")
    first = MilvusVectorStore(uri, COLLECTION, DIM, lite_flush_rows=3)
    await first.start()
    records = [rec(vector=unit(1.0, i / 10)) for i in range(10)]
    for record in records:
        await first.upsert([record])
    await first.delete([records[0].memory_id])
    await first.upsert([rec(memory_id=records[1].memory_id, vector=unit(0.0, 1.0))])
    assert await first.count() == 9
    await first.close()

    reopened = MilvusVectorStore(uri, COLLECTION, DIM)
    await reopened.start()
    try:
        hits = await reopened.search(unit(1.0), scope(), 20)
        assert [memory_id for memory_id, _ in hits] == [r.memory_id for r in records[2:]] + [
            records[1].memory_id
        ]
    finally:
        await reopened.close()


async def test_the_last_store_to_close_stops_milvus_lite_serving_its_directory(tmp_path: Path) -> None:
    """pymilvus' close leaves milvus-lite's in-process server (threads, engine, the directory's
    lock) running: every test leaked one, and a closed store kept other processes out."""
    from milvus_lite.server_manager import server_manager_instance

    path = str(tmp_path / "vectors.db")
    first, second = (MilvusVectorStore(path, "served", 4) for _ in range(2))
    await first.start()
    await second.start()
    served = server_manager_instance._servers  # milvus-lite's own table of served directories
    await first.close()
    assert str(tmp_path / "vectors.db") in served, "still used by the second store"
    await second.close()
    assert str(tmp_path / "vectors.db") not in served
    # Served again on the next open, with what was written before.
    again = MilvusVectorStore(path, "served", 4)
    await again.start()
    try:
        assert await again.count() == 0
    finally:
        await again.close()
