"""The one parse of a request body (C1): a JSON object within the depth limit, else 40001.

The auth guard and the routes read the body through ``parse_body``: the guard parses it once and
leaves the result in the ASGI scope, the route (``ParsedBodyRoute``) takes it from there, or parses
it the same way when the guard did not (auth off). So a body is refused with the same code
whichever key sends it, before any tenancy rule looks at it.
"""

from __future__ import annotations

import email.message
import json
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.types import Scope

from engram.models.errors import EngramError, ErrorCode

MAX_DEPTH = 32
"""Nesting levels of objects and arrays a body may have; the contract's deepest is 4."""

_PARSED = "engram.body"


def _bad(message: str) -> EngramError:
    return EngramError(ErrorCode.BAD_PARAMETER, f"bad parameter: {message}")


def _no_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python's parser would take them.
    raise ValueError(f"{name} is not JSON")


def is_json_type(content_type: str | None) -> bool:
    """True for ``application/json`` and ``application/*+json`` (with any parameters)."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    json_subtype = subtype == "json" or subtype.endswith("+json")
    return message.get_content_maintype() == "application" and json_subtype


def depth_of(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0, ``{}`` is 1), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            break
        stack.extend((child, depth) for child in children)
    return deepest


def parse_body(content_type: str | None, raw: bytes) -> dict[str, Any]:
    """The body as a JSON object; 40001 when it is empty, not JSON, not an object or too deep."""
    if not raw:
        raise _bad("the request body must be a JSON object")
    if not is_json_type(content_type):
        raise _bad("the request body must be sent as application/json")
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise _bad(f"the request body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # JSONDecodeError, bad UTF-8, an integer of more than 4300 digits
        raise _bad("the request body is not valid JSON") from None
    if not isinstance(value, dict):
        raise _bad("the request body must be a JSON object")
    if depth_of(value) > MAX_DEPTH:
        raise _bad(f"the request body nests deeper than {MAX_DEPTH} levels")
    return value


def content_type_of(headers: Mapping[str, str]) -> str | None:
    """The ``content-type`` of lower-cased headers."""
    return headers.get("content-type")


def remember(scope: Scope, body: dict[str, Any]) -> None:
    """Keep the parsed body for the route (the guard parsed it)."""
    scope[_PARSED] = body


class _ParsedRequest(Request):
    """A request whose ``json()`` is ``parse_body``'s answer, parsed at most once per request."""

    async def json(self) -> Any:
        parsed = self.scope.get(_PARSED)
        if parsed is None:
            parsed = parse_body(self.headers.get("content-type"), await self.body())
            self.scope[_PARSED] = parsed
        return parsed


class ParsedBodyRoute(APIRoute):
    """A route whose JSON body is read by ``parse_body`` before FastAPI validates it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, given a request whose body is already parsed (or refused with 40001)."""
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def parsed(request: Request) -> Response:
            own = _ParsedRequest(request.scope, request.receive)
            # Here, not inside FastAPI's handler: its refusal would lose our message.
            await own.json()
            return await handler(own)

        return parsed
