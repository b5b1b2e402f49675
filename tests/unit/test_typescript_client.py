"""The TypeScript client's contract files are made from the app's OpenAPI document (#29)."""

from __future__ import annotations

import copy

import pytest

from engram.serve import typescript_client as ts

pytestmark = pytest.mark.unit


def test_the_checked_in_document_and_types_are_the_apps() -> None:
    assert ts.stale(ts.current()) == [], "run python -m engram.serve.typescript_client"


def test_a_changed_route_makes_both_files_stale() -> None:
    changed = copy.deepcopy(ts.current())
    changed["components"]["schemas"]["RecallRequest"]["properties"]["top_k"] = {"type": "string"}
    assert ts.stale(changed) == [ts.DOCUMENT, ts.GENERATED]


@pytest.mark.parametrize(
    ("schema", "typescript"),
    [
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "string | null"),
        ({"$ref": "#/components/schemas/Level"}, "Level"),
        ({"type": "string", "enum": ["skip", "overwrite"]}, '"skip" | "overwrite"'),
        ({"const": 3}, "3"),
        ({"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}, "(number | null)[]"),
        ({"type": "array"}, "unknown[]"),
        ({"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]}, "[string, number]"),
        ({"type": "object", "additionalProperties": {"type": "boolean"}}, "Record<string, boolean>"),
        (
            {"type": "object", "properties": {"a-b": {"type": "string"}}, "required": []},
            '{ "a-b"?: string; }',
        ),
        ({"type": ["string", "null"]}, "string | null"),
        ({}, "unknown"),
        ({"type": "object"}, "Record<string, unknown>"),
        ({"type": "object", "additionalProperties": False}, "Record<string, never>"),
    ],
)
def test_schema_types(schema: dict[str, object], typescript: str) -> None:
    assert ts.schema_type(schema) == typescript


def test_operations_are_the_enveloped_routes_with_data_never_null() -> None:
    ops = {op.name: op for op in ts.operations(ts.current())}
    assert "user_export_download" not in ops and len(ops) == 21
    assert (ops["add_structured"].method, ops["add_structured"].response) == (
        "addStructured",
        "MemoryCreated | TaskAccepted",
    )
    assert ops["session_close"].path == "/memory/v1/session/close"


def test_answer_only_models_have_every_field_and_requests_keep_their_optional_ones() -> None:
    text = ts.render(ts.current())
    assert "  decisions: Decision[];" in text  # TaskView: the server always writes it
    assert "  top_k?: number | null;" in text  # RecallRequest: the caller may leave it out
