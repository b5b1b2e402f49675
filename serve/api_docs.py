"""Renders docs/api.md from the application's OpenAPI document: ``python -m engram.serve.api_docs``."""

from __future__ import annotations

import json
import sys
from typing import Any

from engram.models.bounds import EARLIEST, LATEST
from engram.models.errors import ErrorCode
from engram.serve.body import MAX_DEPTH
from engram.serve.http_app import build_http_app

HEADER = """# HTTP API

Generated from the OpenAPI document by `python -m engram.serve.api_docs > docs/api.md`
(tests/unit/test_api_docs.py fails when it is out of date). The live document is served at
`/openapi.json`, with an explorer at `/docs`.

Every route is `POST`, JSON in and out, and answers the envelope
`{"code": int, "msg": str, "trace_id": str, "data": ...}`. `code` 0 is success; the HTTP status
mirrors the code's class. Send `X-Trace-Id` to choose the trace id (letters, digits, `_.:-`, up
to 64 characters); it is echoed in the envelope and the response header. With tracing on
(`tracing.enabled`, docs/operations.md), a W3C `traceparent` header continues the caller's
OpenTelemetry trace through the service, and without `X-Trace-Id` the trace id is that trace's.

When API keys are configured (`auth.api_keys`), send one as `Authorization: Bearer <key>` or
`X-API-Key: <key>`: no valid key is 40101, another tenant's app or a `user/*` route without the
admin role is 40303 (docs/privacy.md). `user/export/download` answers JSON Lines
(`application/x-ndjson`), not the envelope, once the export task is DONE.
"""


INPUT_RULES = f"""A request body is one JSON object sent as `application/json`, at most
`limits.max_request_bytes` (1 MiB) and {MAX_DEPTH} levels of nesting deep; anything else
(malformed JSON, an array, `NaN`, an empty body) is 40001 for every key, before any tenancy
rule. Date-times carry a timezone and lie between {EARLIEST.date()} and {LATEST.date()} (UTC);
integers stay within their documented bounds (the `change_log` cursor within a signed 64-bit
integer, an import line's `recall_count` within 32 bits, its `weight` and `confidence` within
[0, 1]): a value outside is 40001, never stored.
"""


def render(openapi: dict[str, Any]) -> str:
    """The Markdown page for an OpenAPI document."""
    lines = [HEADER, INPUT_RULES, "## Routes", ""]
    schemas = openapi.get("components", {}).get("schemas", {})
    for path, methods in sorted(openapi["paths"].items()):
        for method, operation in methods.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
            request_name = body.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
            lines.append(f"### `{method.upper()} {path}`")
            lines.append("")
            if request_name:
                lines.append(f"Request: `{request_name}`")
                lines.append("")
                lines.extend(_fields(schemas.get(request_name, {})))
            response = (
                operation.get("responses", {}).get("200", {}).get("content", {}).get("application/json", {})
            )
            response_name = response.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
            if response_name:
                lines.append(f"Response: `{response_name}`")
                lines.append("")
    lines += ["## Error codes", "", "| code | name | HTTP status |", "|---|---|---|"]
    lines += [f"| {c.value} | {c.name} | {c.http_status} |" for c in ErrorCode]
    return "\n".join(lines) + "\n"


def _fields(schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    if not properties:
        return []
    required = set(schema.get("required", []))
    rows = ["| field | type | required |", "|---|---|---|"]
    for name, spec in properties.items():
        rows.append(f"| `{name}` | {_type(spec)} | {'yes' if name in required else 'no'} |")
    described = [(name, spec["description"]) for name, spec in properties.items() if "description" in spec]
    notes = [f"- `{name}`: {text}" for name, text in described]
    return [*rows, "", *([*notes, ""] if notes else [])]


def _type(spec: dict[str, Any]) -> str:
    if "$ref" in spec:
        return f"`{spec['$ref'].rsplit('/', 1)[-1]}`"
    if "anyOf" in spec:
        return " or ".join(_type(s) for s in spec["anyOf"])
    if spec.get("type") == "array":
        return f"list of {_type(spec.get('items', {}))}"
    if "enum" in spec:
        return " / ".join(json.dumps(v) for v in spec["enum"])
    return str(spec.get("type", "any"))


def main() -> None:
    """Print the page for the application's current OpenAPI document."""
    app = build_http_app(lambda: None, auth=lambda: None)  # type: ignore[arg-type,return-value]
    sys.stdout.write(render(app.openapi()))


if __name__ == "__main__":
    main()
