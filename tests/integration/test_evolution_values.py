"""Evolution by subject, attribute and value over HTTP adds (issue #13), English and Chinese, rules engine.

A changed value leaves only the newest current and the older in history and in ``as_of`` recall; a
repeat is stored once; look-alike facts with different identifiers are both kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from engram.actors.memory_service import MemoryService
from engram.actors.write_path import WritePath
from engram.loadtest.evolution_cases import ADDED, CHANGED
from engram.models.enums import SensitiveCategory
from engram.models.settings import SensitivePolicy, Settings
from engram.serve.http_app import build_http_app
from engram.serve.local_backend import LocalBackend
from engram.serve.memory_core import wire_core
from tests.support.auth import AUTH_OFF

pytestmark = pytest.mark.integration
V1 = "/memory/v1"
DAY0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # These cases are about values that change (passwords, phones, emails among them), not about
    # their privacy: the app allows them verbatim, as a policy may (docs/privacy.md).
    settings.privacy.sensitive = SensitivePolicy(default=dict.fromkeys(SensitiveCategory, "allow"))
    return settings


@pytest.fixture
async def write_path(service: MemoryService) -> AsyncIterator[WritePath]:
    path = WritePath(service)
    yield path
    await path.close()


@pytest.fixture
async def http(write_path: WritePath) -> AsyncIterator[httpx.AsyncClient]:
    backend = LocalBackend(wire_core(write_path.service, write_path))
    app = build_http_app(lambda: backend, auth=lambda: AUTH_OFF, max_body_bytes=1 << 20)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        yield client


async def post(http: httpx.AsyncClient, route: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await http.post(f"{V1}/{route}", json=body)
    payload = response.json()
    assert payload["code"] == 0, payload
    data: dict[str, Any] = payload["data"]
    return data


async def say(http: httpx.AsyncClient, write_path: WritePath, user: str, text: str, day: int) -> list[str]:
    """One HTTP ``add`` of one user message said on ``DAY0 + day``; the task's decision ops."""
    message = {"role": "user", "content": text, "timestamp": (DAY0 + timedelta(days=day)).isoformat()}
    accepted = await post(http, "add", {"user_id": user, "messages": [message]})
    await write_path.drain()
    task = await post(http, "task", {"task_id": accepted["task_id"]})
    assert task["status"] == "DONE", task
    return [d["op"] for d in task["decisions"]]


async def contents(http: httpx.AsyncClient, user: str, status: str) -> list[str]:
    listed = await post(http, "user/list", {"user_id": user, "status": status, "limit": 500})
    return sorted(m["content"] for m in listed["memories"])


async def recalled(
    http: httpx.AsyncClient, user: str, query: str, as_of: datetime | None = None
) -> list[str]:
    body: dict[str, Any] = {"user_id": user, "query": query, "min_relevance": 0.0}
    if as_of is not None:
        body["as_of"] = as_of.isoformat()
    return [m["content"] for m in (await post(http, "recall", body))["memories"]]


@dataclass(frozen=True)
class Change:
    """Values said in turn, one add each; ``marks`` are substrings naming each value."""

    said: tuple[str, ...]
    marks: tuple[str, ...]
    query: str


CHANGES: tuple[Change, ...] = (
    Change(
        (
            "My locker code at the Lisbon office is K001a2b3",
            "My locker code at the Lisbon office is K011bb64",
            "My locker code at the Lisbon office is K021c9d0",
        ),
        ("K001a2b3", "K011bb64", "K021c9d0"),
        "locker code Lisbon office",
    ),
    Change(
        ("My wifi password is sunflower42", "My wifi password is now tulip77"),
        ("sunflower42", "tulip77"),
        "wifi password",
    ),
    Change(
        ("My password hint is the name of my first pet", "My password hint is my mother's maiden name"),
        ("first pet", "maiden"),
        "password hint",
    ),
    Change(
        ("My dentist appointment is on Thursday at 3pm", "I moved my dentist appointment to Friday at 4pm"),
        ("3pm", "4pm"),
        "when is my dentist appointment",
    ),
    Change(
        ("My phone number is 555-0101", "My new phone number is 555-0199"), ("0101", "0199"), "phone number"
    ),
    Change(("I work at Google", "I work at Microsoft"), ("Google", "Microsoft"), "where do I work"),
    Change(("I live in Berlin", "I moved to Lisbon"), ("Berlin", "Lisbon"), "where do I live"),
    Change(
        ("My favourite colour is blue", "My favourite colour is green"), ("blue", "green"), "favourite colour"
    ),
    Change(
        ("My gym membership number is GM-4471", "My gym membership number is GM-9902"),
        ("4471", "9902"),
        "gym membership number",
    ),
    Change(
        ("My flight to Tokyo is on May 3", "My flight to Tokyo is on May 5"),
        ("May 3", "May 5"),
        "flight to Tokyo",
    ),
    Change(("My monthly rent is $1,200", "My monthly rent is $1,350"), ("1,200", "1,350"), "monthly rent"),
    Change(
        ("My daughter's school bus leaves at 7:15", "My daughter's school bus now leaves at 7:40"),
        ("7:15", "7:40"),
        "when does the school bus leave",
    ),
    Change(
        ("My email address is ana@example.com", "My new email address is ana.silva@example.org"),
        ("ana@example.com", "ana.silva@example.org"),
        "email address",
    ),
    Change(
        ("我的邮箱是ana@example.com", "我的邮箱换成了ana.silva@example.org"),
        ("ana@example.com", "ana.silva"),
        "我的邮箱",
    ),
    Change(
        ("我的手机号码是13812345678", "我的手机号换成了13900001111"),
        ("13812345678", "13900001111"),
        "我的手机号",
    ),
    Change(("我的储物柜密码是4321", "我的储物柜密码改成了8765"), ("4321", "8765"), "储物柜密码"),
    Change(("我住在北京", "我搬到上海了"), ("北京", "上海"), "我住在哪里"),
    Change(("我在阿里巴巴工作", "我在腾讯工作"), ("阿里巴巴", "腾讯"), "我在哪里工作"),
    Change(("我最喜欢的水果是苹果", "我最喜欢的水果是芒果"), ("苹果", "芒果"), "最喜欢的水果"),
    Change(("我的牙医预约在周四下午三点", "我的牙医预约改到周五下午四点"), ("周四", "周五"), "牙医预约"),
    Change(("我的车牌号是浙A12345", "我的车牌号换成了浙B67890"), ("A12345", "B67890"), "车牌号"),
)


@pytest.mark.parametrize("change", CHANGES, ids=[c.marks[-1] for c in CHANGES])
async def test_a_changed_value_leaves_only_the_newest_current(
    http: httpx.AsyncClient, write_path: WritePath, change: Change
) -> None:
    for day, text in enumerate(change.said):
        await say(http, write_path, "u1", text, day)
    active = await contents(http, "u1", "ACTIVE")
    superseded = await contents(http, "u1", "SUPERSEDED")
    newest, older = change.marks[-1], change.marks[:-1]
    assert len(active) == 1 and newest in active[0], active
    assert len(superseded) == len(older), superseded
    assert all(any(mark in s for s in superseded) for mark in older), superseded
    # Recall gives the newest now, and each older value as of the day it was current.
    assert any(newest in c for c in await recalled(http, "u1", change.query))
    assert not any(mark in c for c in await recalled(http, "u1", change.query) for mark in older)
    for day, mark in enumerate(older):
        then = await recalled(http, "u1", change.query, as_of=DAY0 + timedelta(days=day, hours=1))
        assert any(mark in c for c in then) and not any(newest in c for c in then), then


@pytest.mark.parametrize(
    "text",
    ["I'm allergic to peanuts.", "我的生日是三月十二号。", "My locker code at the Lisbon office is K001a2b3"],
)
async def test_a_repeat_is_stored_once(http: httpx.AsyncClient, write_path: WritePath, text: str) -> None:
    assert await say(http, write_path, "u1", text, 0) == ["ADD"]
    assert await say(http, write_path, "u1", text, 1) == ["NONE"]
    assert len(await contents(http, "u1", "ACTIVE")) == 1


@pytest.mark.parametrize(
    "said",
    [
        (
            "The reference number of my visa application is VA-1234",
            "The reference number of my tax return is TR-9876",
        ),
        ("My passport number is X1234567", "My daughter's passport number is Y7654321"),
        ("我的护照号码是E12345678", "我女儿的护照号码是E87654321"),
        ("I paid invoice 4471 from the plumber", "I paid invoice 4472 from the plumber"),
        ("I'm allergic to peanuts", "I'm also allergic to shellfish"),
    ],
)
async def test_look_alike_facts_are_both_kept(
    http: httpx.AsyncClient, write_path: WritePath, said: tuple[str, str]
) -> None:
    for day, text in enumerate(said):
        assert await say(http, write_path, "u1", text, day) == ["ADD"]
    assert len(await contents(http, "u1", "ACTIVE")) == 2
    assert await contents(http, "u1", "SUPERSEDED") == []


async def test_an_older_value_arriving_late_is_history(
    http: httpx.AsyncClient, write_path: WritePath
) -> None:
    await say(http, write_path, "u1", "My locker code at the Lisbon office is K021c9d0", 5)
    assert await say(http, write_path, "u1", "My locker code at the Lisbon office is K001a2b3", 1) == [
        "SUPERSEDE"
    ]
    active = await contents(http, "u1", "ACTIVE")
    assert len(active) == 1 and "K021c9d0" in active[0]


async def test_the_evolution_set_through_adds(http: httpx.AsyncClient, write_path: WritePath) -> None:
    """#31: every changed value of the set, told in everyday words, supersedes its predecessor; no
    additive fact is lost. Each pair is one user of one store: the stored fact, then an ``add``."""
    wrong: list[str] = []
    for index, pair in enumerate((*CHANGED, *ADDED)):
        user = f"evo-{index}"
        stored = {"ownership": "USER", "mem_type": "SEMANTIC", "content": pair.old, "sync": True}
        await post(http, "add_structured", {"user_id": user, **stored, "valid_at": DAY0.isoformat()})
        ops = await say(http, write_path, user, pair.new, 1)
        superseded = await contents(http, user, "SUPERSEDED")
        active = await contents(http, user, "ACTIVE")
        if pair.changed and (len(superseded) != 1 or "SUPERSEDE" not in ops):
            wrong.append(f"changed {pair.old!r} -> {pair.new!r}: {ops}, {len(superseded)} superseded")
        if not pair.changed and (superseded or len(active) < 2):
            wrong.append(f"added {pair.old!r} + {pair.new!r}: {ops}, {len(active)} active")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    "said",
    [
        "I moved to Porto last spring, and now I work at Stripe",
        "我搬到上海了，现在在腾讯上班",
    ],
)
async def test_two_changed_values_in_one_add_each_supersede_their_own(
    http: httpx.AsyncClient, write_path: WritePath, said: str
) -> None:
    stored = ("Lives in Lisbon", "Works at Google") if said.isascii() else ("住在北京", "在阿里巴巴工作")
    for content in stored:
        body = {"ownership": "USER", "mem_type": "SEMANTIC", "content": content, "sync": True}
        await post(http, "add_structured", {"user_id": "u1", **body, "valid_at": DAY0.isoformat()})
    ops = await say(http, write_path, "u1", said, 1)
    assert ops == ["SUPERSEDE", "SUPERSEDE"]
    assert await contents(http, "u1", "SUPERSEDED") == sorted(stored)
