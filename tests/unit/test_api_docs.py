"""docs/api.md is the rendering of the current OpenAPI document."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.serve.api_docs import render
from engram.serve.http_app import build_http_app
from engram.serve.operations import OPERATIONS

pytestmark = pytest.mark.unit

API_MD = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_api_doc_is_up_to_date() -> None:
    app = build_http_app(lambda: None, auth=lambda: None)  # type: ignore[arg-type,return-value]
    assert API_MD.read_text() == render(app.openapi()), "run: python -m engram.serve.api_docs > docs/api.md"


def test_every_contract_route_is_documented() -> None:
    text = API_MD.read_text()
    for route in [op.path for op in OPERATIONS] + ["user/export/download"]:
        assert f"`POST /memory/v1/{route}`" in text
