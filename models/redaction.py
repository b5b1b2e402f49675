"""Secrets kept out of what Engram prints or logs (P3): settings shown with every secret masked.

A secret is a ``SecretStr`` field, a string field named like one (``api_key``, ``*token*``,
``*password*``, ``*secret*``), the password of a URL's user part, or a query parameter of a URL
named like one. Nothing here reads a secret's value except to replace it.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ValidationError

REDACTED = "**********"
"""What stands for a secret (pydantic's own mask of ``SecretStr``)."""

_SECRET_NAME = re.compile(r"api_?key|token|passw(or)?d|secret|credential|private_?key", re.IGNORECASE)
# Query parameters that carry credentials in URLs (presigned URLs, token-in-URL APIs).
_SECRET_PARAM = re.compile(
    r"^(key|sig|signature|auth|access_?key|x-amz-signature|x-amz-credential)$|" + _SECRET_NAME.pattern,
    re.IGNORECASE,
)


# scheme://user:password@host: the password up to the first "@", as SQLAlchemy reads it ("/" too).
_USER_PASSWORD = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@]*):[^@]*@")
_PARAM = re.compile(r"(?P<sep>[?&;])(?P<name>[^=&#;]+)=(?P<value>[^&#;]*)")


def is_secret_name(name: str) -> bool:
    """True when a field or parameter of this name holds a secret."""
    return bool(_SECRET_NAME.search(name))


def redact_url(text: str) -> str:
    """``text`` with the password of its user part and its secret query values masked."""
    text = _USER_PASSWORD.sub(rf"\g<head>:{REDACTED}@", text, count=1)
    return _PARAM.sub(_redact_param, text)


def _redact_param(match: re.Match[str]) -> str:
    name = match["name"]
    return f"{match['sep']}{name}={REDACTED}" if _SECRET_PARAM.search(name) else match[0]


def redacted(value: Any, name: str = "") -> Any:
    """A JSON-ready value (a settings dump) with every secret in it masked; ``name``: its field."""
    if isinstance(value, dict):
        return {key: redacted(item, str(key)) for key, item in value.items()}
    if isinstance(value, list):
        return [redacted(item, name) for item in value]
    if isinstance(value, str) and value:
        if is_secret_name(name):
            return REDACTED
        if "://" in value:
            return redact_url(value)
    return value


def redacted_settings(settings: BaseModel) -> dict[str, Any]:
    """The settings as JSON-ready data, every secret masked (``engram config`` prints this)."""
    # mode="json" already masks SecretStr fields; the names and URLs catch the rest.
    dumped = redacted(settings.model_dump(mode="json"))
    assert isinstance(dumped, dict)
    return dumped


def problems(exc: ValidationError) -> str:
    """A validation error's fields and reasons, without the values given (they may be secrets)."""
    return "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or 'settings'}: {error['msg']}"
        for error in exc.errors(include_input=False, include_url=False, include_context=False)
    )
