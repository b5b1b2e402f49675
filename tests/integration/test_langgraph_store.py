"""LangGraph's store over Engram (#29): ``EngramStore`` against the real HTTP app with a tenant's
key, async over the in-process app and sync over a real socket, and inside compiled graphs."""

from __future__ import annotations

import asyncio
import importlib.util
import operator
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict, TypeVar

import pytest
import uvicorn
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError, Item
from langgraph.store.memory import InMemoryStore

from engram import AsyncEngramClient, EngramClient
from engram.integrations import langgraph_items as items
from engram.integrations.langgraph import EngramStore
from engram.models.api import AddStructuredRequest, UserListRequest
from engram.models.enums import Level, MemType, Ownership, Status
from engram.models.settings import Settings
from engram.serve.client import EngramApiError
from engram.storage.stores import Stores
from tests.conftest import ManualClock
from tests.support.privacy_app import PrivacyApp, privacy_app

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRAVEL = "travel-key-0123456789abcdef"
ADMIN = "admin-key-0123456789abcdef"
KEYS = [
    {"name": "travel", "key": TRAVEL, "app_ids": ["travel"], "global_scope": True},
    {"name": "ops", "key": ADMIN, "admin": True},
]
T = TypeVar("T")


@pytest.fixture
async def app(settings: Settings, stores: Stores, clock: ManualClock) -> AsyncIterator[PrivacyApp]:
    async with privacy_app(settings, stores, clock, api_keys=KEYS) as running:
        yield running


@pytest.fixture
async def aclient(app: PrivacyApp) -> AsyncIterator[AsyncEngramClient]:
    async with app.client(TRAVEL) as client:
        yield client


@pytest.fixture
async def admin(app: PrivacyApp) -> AsyncIterator[AsyncEngramClient]:
    """An operator's client, to look at the memories the store wrote (user/list needs an admin key)."""
    async with app.client(ADMIN) as client:
        yield client


@pytest.fixture
def store(aclient: AsyncEngramClient) -> EngramStore:
    return EngramStore(aclient=aclient, app_id="travel")


@pytest.fixture
async def served(app: PrivacyApp) -> AsyncIterator[str]:
    """The app on a real loopback socket, for the sync client (which cannot use the ASGI transport)."""
    server = uvicorn.Server(
        uvicorn.Config(app.asgi, host="127.0.0.1", port=0, lifespan="off", log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            assert not task.done(), "the server stopped before it listened"
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@contextmanager
def sync_client(url: str) -> Iterator[EngramClient]:
    client = EngramClient(url, api_key=TRAVEL, timeout_s=60)
    try:
        yield client
    finally:
        client.close()


async def in_thread(work: Callable[[], T]) -> T:
    """Sync store calls block: run them beside the event loop that serves the app."""
    return await asyncio.to_thread(work)


async def test_put_get_update_and_delete_one_item(store: EngramStore) -> None:
    namespace = ("traveller", "preferences")
    await store.aput(namespace, "seat", {"text": "Prefers a window seat on long flights", "rank": 1})
    first = await store.aget(namespace, "seat")
    assert isinstance(first, Item)
    assert first.namespace == namespace and first.key == "seat"
    assert first.value == {"text": "Prefers a window seat on long flights", "rank": 1}

    await store.aput(namespace, "seat", {"text": "Prefers an aisle seat on long flights", "rank": 2})
    second = await store.aget(namespace, "seat")
    assert second is not None
    assert second.value == {"text": "Prefers an aisle seat on long flights", "rank": 2}
    assert second.created_at == first.created_at and second.updated_at >= first.updated_at
    # One memory holds the item: the second put updated it in place.
    assert len(await store.asearch(("traveller",))) == 1

    await store.adelete(namespace, "seat")
    assert await store.aget(namespace, "seat") is None
    assert await store.aget(namespace, "never-put") is None


async def test_items_are_one_users_memories_with_the_keys_app(
    store: EngramStore, admin: AsyncEngramClient
) -> None:
    await store.aput(("traveller", "preferences"), "seat", {"text": "Prefers a window seat"})
    page = await admin.user_list(UserListRequest(user_id="traveller"))
    [memory] = page.memories
    assert memory.app_id == "travel" and memory.level.value == "APP"
    assert memory.content == '{"text": "Prefers a window seat"}'
    assert "lg.key:seat" in memory.custom_tags
    assert (await admin.user_list(UserListRequest(user_id="preferences"))).memories == []


async def test_search_by_meaning_within_a_namespace_prefix(store: EngramStore) -> None:
    await store.aput(("traveller", "preferences"), "seat", {"text": "Prefers a window seat on long flights"})
    await store.aput(("traveller", "preferences"), "food", {"text": "Eats vegetarian meals only"})
    await store.aput(("traveller", "notes"), "visa", {"text": "Needs a visa to travel to India"})
    await store.aput(("someone-else", "preferences"), "seat", {"text": "Prefers a window seat as well"})

    best = await store.asearch(("traveller",), query="which seat should I book on the plane?")
    assert best[0].key == "seat" and best[0].namespace == ("traveller", "preferences")
    assert best[0].score is not None and best[0].score > 0
    assert {item.namespace[0] for item in best} == {"traveller"}

    within = await store.asearch(("traveller", "notes"), query="which seat should I book on the plane?")
    assert [item.key for item in within] in ([], ["visa"])
    everything = await store.asearch(("traveller",))
    assert {(item.namespace[-1], item.key) for item in everything} == {
        ("preferences", "seat"),
        ("preferences", "food"),
        ("notes", "visa"),
    }


async def test_search_filters_on_the_value_and_pages(store: EngramStore) -> None:
    for i in range(5):
        await store.aput(
            ("traveller", "trips"), f"trip-{i}", {"text": f"Trip number {i}", "n": i, "kind": "trip"}
        )
    found = await store.asearch(("traveller", "trips"), filter={"n": {"$gte": 2}, "kind": "trip"})
    assert sorted(item.value["n"] for item in found) == [2, 3, 4]
    assert [item.value["n"] for item in await store.asearch(("traveller", "trips"), filter={"n": 3})] == [3]
    assert await store.asearch(("traveller", "trips"), filter={"n": {"$ne": 9}, "missing": 1}) == []
    everything = await store.asearch(("traveller", "trips"), limit=10)
    pages = [await store.asearch(("traveller", "trips"), limit=2, offset=offset) for offset in (0, 2, 4)]
    assert [item.key for page in pages for item in page] == [item.key for item in everything]
    assert [len(page) for page in pages] == [2, 2, 1]


async def test_list_namespaces_of_one_user(store: EngramStore) -> None:
    await store.aput(("traveller", "preferences"), "seat", {"text": "window"})
    await store.aput(("traveller", "notes", "india"), "visa", {"text": "visa needed"})
    await store.aput(("traveller", "notes", "japan"), "rail", {"text": "rail pass"})
    await store.aput(("other", "notes"), "x", {"text": "someone else"})

    assert await store.alist_namespaces(prefix=("traveller",)) == [
        ("traveller", "notes", "india"),
        ("traveller", "notes", "japan"),
        ("traveller", "preferences"),
    ]
    assert await store.alist_namespaces(prefix=("traveller",), max_depth=2) == [
        ("traveller", "notes"),
        ("traveller", "preferences"),
    ]
    assert await store.alist_namespaces(prefix=("traveller", "*"), suffix=("japan",)) == [
        ("traveller", "notes", "japan")
    ]
    with pytest.raises(InvalidNamespaceError, match="names the user"):
        await store.alist_namespaces(suffix=("japan",))


async def test_a_template_places_the_user_label(aclient: AsyncEngramClient, admin: AsyncEngramClient) -> None:
    store = EngramStore(aclient=aclient, app_id="travel", template=("memories", "{user_id}"))
    await store.aput(("memories", "traveller"), "seat", {"text": "window"})
    assert (await admin.user_list(UserListRequest(user_id="traveller"))).memories
    with pytest.raises(InvalidNamespaceError, match="does not match the template"):
        await store.aget(("notes", "traveller"), "seat")
    with pytest.raises(InvalidNamespaceError, match="stops before the user label"):
        await store.asearch(("memories",))
    with pytest.raises(ValueError, match="exactly once"):
        EngramStore(aclient=aclient, template=("memories",))


async def test_bad_keys_and_labels_are_refused_before_any_write(
    store: EngramStore, admin: AsyncEngramClient
) -> None:
    with pytest.raises(InvalidNamespaceError, match="key"):
        await store.aput(("traveller",), "k" * 49, {"text": "too long a key"})
    with pytest.raises(InvalidNamespaceError, match="periods"):
        await store.aput(("traveller", "a.b"), "seat", {"text": "dotted"})
    with pytest.raises(InvalidNamespaceError):
        await store.aput(("traveller", " padded"), "seat", {"text": "spaces"})
    assert (await admin.user_list(UserListRequest(user_id="traveller"))).memories == []


async def test_a_secret_in_a_value_is_redacted_like_any_write(store: EngramStore) -> None:
    await store.aput(("traveller",), "card", {"text": "My card number is 4111 1111 1111 1111"})
    item = await store.aget(("traveller",), "card")
    assert item is not None and "4111" not in str(item.value)


async def test_the_store_acts_with_the_callers_key_only(aclient: AsyncEngramClient) -> None:
    elsewhere = EngramStore(aclient=aclient, app_id="billing")
    with pytest.raises(EngramApiError) as refused:
        await elsewhere.aput(("traveller",), "card", {"text": "Pays by card"})
    assert refused.value.code == 40303


async def test_the_sync_store_over_a_real_socket(served: str) -> None:
    def work() -> tuple[Item | None, list[str], Item | None]:
        with sync_client(served) as client:
            store = EngramStore(client, app_id="travel")
            store.put(("traveller", "preferences"), "seat", {"text": "Prefers a window seat"})
            got = store.get(("traveller", "preferences"), "seat")
            keys = [item.key for item in store.search(("traveller",), query="where do I like to sit?")]
            store.delete(("traveller", "preferences"), "seat")
            return got, keys, store.get(("traveller", "preferences"), "seat")

    got, keys, gone = await in_thread(work)
    assert got is not None and got.value == {"text": "Prefers a window seat"}
    assert keys == ["seat"] and gone is None


def test_a_store_without_the_client_a_call_needs_says_so() -> None:
    store = EngramStore(aclient=AsyncEngramClient("http://127.0.0.1:9"))
    with pytest.raises(RuntimeError, match="no sync client"):
        store.get(("traveller",), "seat")
    with pytest.raises(ValueError, match="needs a client"):
        EngramStore()


class Turn(TypedDict):
    user: str
    said: Annotated[list[str], operator.add]
    answer: str


def remember_then_answer(graph_store: BaseStore) -> Any:
    """A two-node graph: the first node stores what the user said, the second answers from the store."""

    async def remember(state: Turn, *, store: BaseStore) -> dict[str, Any]:
        for i, fact in enumerate(state["said"]):
            await store.aput((state["user"], "facts"), f"fact-{i}", {"text": fact})
        return {}

    async def answer(state: Turn, *, store: BaseStore) -> dict[str, Any]:
        found = await store.asearch((state["user"], "facts"), query="How do I get to work?", limit=1)
        return {"answer": found[0].value["text"] if found else "I don't know."}

    builder = StateGraph(Turn)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    return builder.compile(store=graph_store)


async def test_a_graph_remembers_and_answers_through_the_store(store: EngramStore) -> None:
    said = ["I prefer taking a taxi to work.", "My sister lives in Lisbon."]
    result = await remember_then_answer(store).ainvoke({"user": "traveller", "said": said, "answer": ""})
    assert result["answer"] == "I prefer taking a taxi to work."
    # The same graph on LangGraph's own in-memory store reads the same shape of items.
    reference = InMemoryStore()
    await remember_then_answer(reference).ainvoke({"user": "traveller", "said": said, "answer": ""})
    ours = {(i.namespace, i.key, str(i.value)) for i in await store.asearch(("traveller",))}
    theirs = {(i.namespace, i.key, str(i.value)) for i in await reference.asearch(("traveller",))}
    assert ours == theirs


async def test_the_example_graph_answers_from_the_store(served: str) -> None:
    spec = importlib.util.spec_from_file_location("example_langgraph_store", EXAMPLES / "langgraph_store.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    answer = await in_thread(lambda: example.main(served, api_key=TRAVEL))
    assert answer == "From memory: I prefer taking a taxi to work.", answer


async def test_a_key_that_two_racing_puts_both_added_is_one_item_again_after_the_next_put(
    store: EngramStore, aclient: AsyncEngramClient, admin: AsyncEngramClient, clock: ManualClock
) -> None:
    namespace = ("traveller", "preferences")
    for text in ("Prefers a window seat", "Prefers an aisle seat"):  # two puts that both found nothing
        clock.advance(seconds=1)
        await aclient.add_structured(
            AddStructuredRequest(
                user_id="traveller",
                app_id="travel",
                level=Level.APP,
                ownership=Ownership.USER,
                mem_type=MemType.SEMANTIC,
                content=items.encode_value({"text": text}),
                custom_tags=items.tags_for(namespace, "seat"),
                sync=True,
            )
        )
    newest = await store.aget(namespace, "seat")
    assert newest is not None and newest.value == {"text": "Prefers an aisle seat"}
    await store.aput(namespace, "seat", {"text": "Prefers the front row"})
    [memory] = (await admin.user_list(UserListRequest(user_id="traveller", status=Status.ACTIVE))).memories
    assert items.decode_value(memory.content or "") == {"text": "Prefers the front row"}
