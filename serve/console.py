"""The memory console (SPEC O5) at ``/ui``: one static page, a script and a style sheet.

The page holds no data and no privilege of its own: its script calls the ``/memory/v1/*`` routes
with ``fetch()``, sending the API key the person typed in the ``Authorization`` header (never a
cookie, so a cross-site form cannot act with it). The assets ship as package data of
``engram.serve`` (``static/``), so an installed wheel serves them too.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import Response

from engram.models.errors import EngramError, ErrorCode

CONSOLE_PATH = "/ui"
ASSETS = {
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
# Only this origin's script and styles run, nothing may frame the page (clickjacking), and no
# address it visits is sent on as a referrer.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@cache
def asset(name: str) -> bytes:
    """The bytes of one of the console's files (read once per process)."""
    return (files("engram.serve") / "static" / name).read_bytes()


def add_console_route(app: FastAPI) -> None:
    """Serve the console at ``/ui`` and its assets at ``/ui/<name>`` on ``app`` (outside the API)."""

    @app.get(CONSOLE_PATH, include_in_schema=False)
    async def console_page() -> Response:
        return Response(asset("index.html"), media_type="text/html; charset=utf-8", headers=HEADERS)

    @app.get(CONSOLE_PATH + "/{name}", include_in_schema=False)
    async def console_asset(name: str) -> Response:
        media_type = ASSETS.get(name)
        if media_type is None:
            raise EngramError(ErrorCode.NOT_FOUND, "no such console file")
        return Response(asset(name), media_type=media_type, headers=HEADERS)
