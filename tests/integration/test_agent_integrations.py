"""Memory as tools in agent frameworks (#29): the four tools over the real HTTP app with a tenant's
key, and the pydantic-ai and OpenAI Agents examples, each driven by its scripted model."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import pytest

from engram import AsyncEngramClient
from engram.integrations.memory_tools import MemoryTools
from engram.models.settings import Settings
from engram.serve.client import EngramApiError
from engram.storage.stores import Stores
from tests.conftest import ManualClock
from tests.support.privacy_app import PrivacyApp, privacy_app

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRAVEL = "travel-key-0123456789abcdef"
KEYS = [{"name": "travel", "key": TRAVEL, "app_ids": ["travel"], "global_scope": True}]


@pytest.fixture
async def app(settings: Settings, stores: Stores, clock: ManualClock) -> AsyncIterator[PrivacyApp]:
    async with privacy_app(settings, stores, clock, api_keys=KEYS) as running:
        yield running


@pytest.fixture
async def client(app: PrivacyApp) -> AsyncIterator[AsyncEngramClient]:
    """A client of the app carrying the travel app's key, as an agent's process would hold it."""
    async with app.client(TRAVEL) as keyed:
        yield keyed


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_four_tools_search_remember_update_and_forget(client: AsyncEngramClient) -> None:
    tools = MemoryTools(client, "traveller", app_id="travel")
    seat = await tools.remember("Prefers a window seat on long flights")
    [found] = await tools.search("which seat should I book?")
    assert found["memory_id"] == seat and found["relevance"] > 0
    assert await tools.update(seat, "Prefers an aisle seat on long flights") == "ACTIVE"
    assert [m["content"] for m in await tools.search("which seat should I book?")] == [
        "Prefers an aisle seat on long flights"
    ]
    assert await tools.forget(seat) == "forgotten"
    assert await tools.search("which seat should I book?") == []


async def test_the_tools_act_with_the_callers_key_only(client: AsyncEngramClient) -> None:
    elsewhere = MemoryTools(client, "traveller", app_id="billing")
    with pytest.raises(EngramApiError) as refused:
        await elsewhere.remember("Pays by card")
    assert refused.value.code == 40303


async def test_a_remembered_secret_is_redacted_like_any_write(client: AsyncEngramClient) -> None:
    tools = MemoryTools(client, "traveller", app_id="travel")
    await tools.remember("My card number is 4111 1111 1111 1111 for bookings")
    [found] = await tools.search("what card do I book with?")
    assert "4111" not in found["content"]


@pytest.mark.parametrize("name", ["pydantic_ai_agent", "openai_agents_agent"])
async def test_the_framework_example_remembers_and_answers_from_memory(app: PrivacyApp, name: str) -> None:
    async with app.client(TRAVEL) as client:
        answer = await example(name).run(client, user_id=name)
    assert answer == "From memory: I prefer taking a taxi to work.", answer
