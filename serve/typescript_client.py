"""Writes the TypeScript client's contract from the application's OpenAPI document (#29):
``clients/typescript/openapi.json`` (the document, checked in) and ``src/generated.ts`` (its types,
the error codes, and one method per enveloped operation).

Run ``python -m engram.serve.typescript_client`` after changing a route or a model;
``--check`` exits 1 when either file is out of date (tests/unit/test_typescript_client.py runs it,
and the client's own ``npm test`` checks that generated.ts was made from the openapi.json beside it).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engram.models.errors import ErrorCode

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "clients" / "typescript"
DOCUMENT = CLIENT / "openapi.json"
GENERATED = CLIENT / "src" / "generated.ts"

REF = "#/components/schemas/"
ENVELOPE = "Envelope_"
# FastAPI's own validation schemas: Engram answers 40001 in its envelope instead.
SKIPPED = frozenset({"HTTPValidationError", "ValidationError"})
IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


@dataclass(frozen=True)
class TsOperation:
    """One enveloped operation: its method name, route, doc and the types it sends and answers."""

    name: str
    method: str
    path: str
    doc: str
    request: str
    response: str


def document_text(openapi: dict[str, Any]) -> str:
    """The checked-in form of the document: stable key order, two-space indent."""
    return json.dumps(openapi, indent=2, ensure_ascii=False) + "\n"


def camel(name: str) -> str:
    """``add_structured`` -> ``addStructured``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def schema_type(spec: dict[str, Any] | bool) -> str:
    """The TypeScript type of one JSON Schema (as pydantic writes them)."""
    if spec is True or spec == {}:
        return "unknown"
    if spec is False:
        return "never"
    assert isinstance(spec, dict)
    if "$ref" in spec:
        return str(spec["$ref"]).removeprefix(REF)
    if "const" in spec:
        return json.dumps(spec["const"])
    if "enum" in spec:
        return " | ".join(json.dumps(v) for v in spec["enum"])
    for key, joiner in (("anyOf", " | "), ("oneOf", " | "), ("allOf", " & ")):
        if key in spec:
            parts = [schema_type(s) for s in spec[key]]
            return joiner.join(f"({p})" if " " in p and not p.startswith("{") else p for p in parts)
    kind = spec.get("type")
    if isinstance(kind, list):
        return " | ".join(schema_type({**spec, "type": k}) for k in kind)
    if kind == "array":
        if "prefixItems" in spec:
            return "[" + ", ".join(schema_type(s) for s in spec["prefixItems"]) + "]"
        item = schema_type(spec.get("items", True))
        return f"({item})[]" if " " in item else f"{item}[]"
    if kind == "object" or "properties" in spec:
        return _object_literal(spec, all_present=False)
    return {
        "string": "string",
        "integer": "number",
        "number": "number",
        "boolean": "boolean",
        "null": "null",
    }.get(str(kind), "unknown")


def _object_literal(spec: dict[str, Any], *, all_present: bool) -> str:
    fields = list(_fields(spec, all_present=all_present, indent=""))
    extra = spec.get("additionalProperties")
    if not fields:
        # JSON Schema allows any other key unless additionalProperties says otherwise.
        return "Record<string, never>" if extra is False else f"Record<string, {schema_type(extra or True)}>"
    body = " ".join(fields)
    if extra not in (None, False):
        body += f" [key: string]: {schema_type(extra)};"
    return "{ " + body + " }"


def _fields(spec: dict[str, Any], *, all_present: bool, indent: str) -> Iterator[str]:
    required = set(spec.get("required", []))
    for name, prop in spec.get("properties", {}).items():
        key = name if IDENTIFIER.match(name) else json.dumps(name)
        optional = "" if all_present or name in required else "?"
        yield f"{indent}{key}{optional}: {schema_type(prop)};"


def _comment(text: str, indent: str = "") -> list[str]:
    text = " ".join(text.replace("``", "`").replace("*/", "*\\/").split())
    return [f"{indent}/** {text} */"] if text else []


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "$ref" and isinstance(inner, str):
                yield inner.removeprefix(REF)
            else:
                yield from _refs(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _refs(inner)


def _reachable(roots: Iterable[str], schemas: dict[str, Any]) -> set[str]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name not in schemas:
            continue
        seen.add(name)
        todo.extend(_refs(schemas[name]))
    return seen


def operations(openapi: dict[str, Any]) -> list[TsOperation]:
    """Every POST route that takes a JSON body and answers the envelope, in document order."""
    schemas = openapi["components"]["schemas"]
    found: list[TsOperation] = []
    for path, methods in openapi["paths"].items():
        post = methods.get("post")
        if not post:
            continue
        body = post.get("requestBody", {}).get("content", {}).get("application/json", {})
        answer = post.get("responses", {}).get("200", {}).get("content", {}).get("application/json", {})
        request_ref = body.get("schema", {}).get("$ref", "")
        envelope = answer.get("schema", {}).get("$ref", "").removeprefix(REF)
        if not request_ref or not envelope.startswith(ENVELOPE):
            continue
        data = schemas[envelope]["properties"]["data"]
        # ``data`` is null only in an error envelope, which the client raises instead of returning.
        data = {"anyOf": [s for s in data["anyOf"] if s != {"type": "null"}]} if "anyOf" in data else data
        found.append(
            TsOperation(
                name=post["operationId"],
                method=camel(post["operationId"]),
                path=path,
                doc=post.get("description", post.get("summary", "")),
                request=request_ref.removeprefix(REF),
                response=schema_type(data),
            )
        )
    return found


def render(openapi: dict[str, Any]) -> str:
    """The text of src/generated.ts for an OpenAPI document."""
    schemas: dict[str, Any] = openapi["components"]["schemas"]
    ops = operations(openapi)
    # The server writes every field of a model it answers with (defaults included): a schema only
    # answers reach has no optional fields. One a request reaches keeps its optional ones.
    sent = _reachable((op.request for op in ops), schemas)
    digest = hashlib.sha256(document_text(openapi).encode()).hexdigest()
    out = [
        "// Generated by `python -m engram.serve.typescript_client` from openapi.json; do not edit.",
        f"// openapi.json sha256: {digest}",
        "",
        'import type { CallOptions } from "./call.js";',
        "",
        "/** The envelope's `code` values (SPEC C9); the HTTP status mirrors the class. */",
        "export const ErrorCode = {",
        *(f"  {code.name}: {code.value}," for code in ErrorCode),
        "} as const;",
        "export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];",
        "",
    ]
    for name, spec in schemas.items():
        if name.startswith(ENVELOPE) or name in SKIPPED:
            continue
        out += _comment(spec.get("description", ""))
        if spec.get("type") == "object" and "properties" in spec:
            out.append(f"export interface {name} {{")
            out += list(_fields(spec, all_present=name not in sent, indent="  "))
            out.append("}")
        else:
            out.append(f"export type {name} = {schema_type(spec)};")
        out.append("")
    out += ["/** Each operation's request and response types, by its name in the contract. */"]
    out.append("export interface OperationTypes {")
    out += [f"  {op.name}: {{ request: {op.request}; response: {op.response} }};" for op in ops]
    out += ["}", "export type OperationName = keyof OperationTypes;", ""]
    out.append("/** Each operation's route. */")
    out.append("export const OPERATION_PATHS: { readonly [N in OperationName]: string } = {")
    out += [f"  {op.name}: {json.dumps(op.path)}," for op in ops]
    out += ["};", ""]
    out += [
        "/** One method per operation of the contract; a client supplies how a call is sent. */",
        "export abstract class Operations {",
        "  protected abstract send<N extends OperationName>(",
        "    name: N,",
        '    request: OperationTypes[N]["request"],',
        "    options?: CallOptions,",
        '  ): Promise<OperationTypes[N]["response"]>;',
    ]
    for op in ops:
        out += ["", *_comment(op.doc, "  ")]
        out.append(f"  {op.method}(request: {op.request}, options?: CallOptions): Promise<{op.response}> {{")
        out.append(f"    return this.send({json.dumps(op.name)}, request, options);")
        out.append("  }")
    out += ["}", ""]
    return "\n".join(out)


def current() -> dict[str, Any]:
    """The OpenAPI document of the application as this checkout builds it."""
    from engram.serve.http_app import build_http_app

    app = build_http_app(lambda: None, auth=lambda: None)  # type: ignore[arg-type,return-value]
    return app.openapi()


def stale(openapi: dict[str, Any]) -> list[Path]:
    """The checked-in files that differ from what ``openapi`` makes."""
    wanted = {DOCUMENT: document_text(openapi), GENERATED: render(openapi)}
    return [p for p, text in wanted.items() if not p.exists() or p.read_text(encoding="utf-8") != text]


def main(argv: list[str]) -> int:
    """Write both files (or, with ``--check``, name the stale ones and exit 1)."""
    openapi = current()
    if "--check" in argv:
        out_of_date = stale(openapi)
        for path in out_of_date:
            print(f"{path.relative_to(ROOT)} is out of date: run python -m engram.serve.typescript_client")
        return 1 if out_of_date else 0
    GENERATED.parent.mkdir(parents=True, exist_ok=True)
    DOCUMENT.write_text(document_text(openapi), encoding="utf-8")
    GENERATED.write_text(render(openapi), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
