"""The console's files at /ui (O5): static, outside the API and its schema, locked down by headers."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest

from engram.models.settings import AuthSettings
from engram.serve.auth import Authenticator
from engram.serve.console import ASSETS, asset
from engram.serve.http_app import build_http_app

pytestmark = pytest.mark.unit
KEY = "console-route-key-0123456789"


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    keys = Authenticator(
        AuthSettings.model_validate({"api_keys": [{"name": "ops", "key": KEY, "admin": True}]})
    )
    app = build_http_app(lambda: None, auth=lambda: keys)  # type: ignore[arg-type,return-value]
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        yield client


async def test_the_page_and_its_assets_are_served_without_a_key(http: httpx.AsyncClient) -> None:
    page = await http.get("/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    # Every file the page names is one the route serves, from this origin.
    named = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert sorted(named) == sorted(f"/ui/{name}" for name in ASSETS)
    for name, media_type in ASSETS.items():
        response = await http.get(f"/ui/{name}")
        assert response.status_code == 200 and response.headers["content-type"] == media_type
        assert response.content == asset(name)
    # The data is not: the API still wants the key the page asks for.
    refused = await http.post("/memory/v1/user/list", json={"user_id": "u"})
    assert (refused.status_code, refused.json()["code"]) == (401, 40101)


async def test_the_page_is_locked_down(http: httpx.AsyncClient) -> None:
    response = await http.get("/ui")
    policy = response.headers["content-security-policy"]
    for directive in (
        "script-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'none'",
    ):
        assert directive in policy
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert "set-cookie" not in response.headers


async def test_nothing_else_is_served_under_ui_and_nothing_enters_the_schema(http: httpx.AsyncClient) -> None:
    for path in ("/ui/index.html", "/ui/../console.py", "/ui/console.py", "/ui/py.typed"):
        response = await http.get(path)
        assert response.status_code == 404, path
    schema = (await http.get("/openapi.json")).json()
    assert not [path for path in schema["paths"] if path.startswith("/ui")]


def test_the_script_puts_content_into_the_page_as_text_only() -> None:
    # Memory content is user data: the script never parses it as HTML, and sends no cookie.
    script = asset("console.js").decode()
    for unsafe in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "document.cookie",
    ):
        assert unsafe not in script, unsafe
    assert 'credentials: "omit"' in script
