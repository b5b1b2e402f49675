"""API models: the identifier rules and limits of C1, scope rules, and error-code classes (C9)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engram.models.api import (
    AddRequest,
    AddStructuredRequest,
    BatchDeleteRequest,
    ChangeLogRequest,
    RecallRequest,
    UpdateRequest,
)
from engram.models.enums import Role
from engram.models.errors import ErrorCode

pytestmark = pytest.mark.unit

MEMORY_ID = "0123456789abcdef0123456789abcdef"


def test_integer_user_id_reads_as_decimal_string() -> None:
    assert RecallRequest(user_id=123456789, query="q").user_id == "123456789"


@pytest.mark.parametrize("user_id", ["", "a b", "x" * 129, "quote'", 'dq"', "semi;colon", "../etc", True])
def test_bad_identifiers_are_refused(user_id: object) -> None:
    with pytest.raises(ValidationError):
        RecallRequest(user_id=user_id, query="q")


@pytest.mark.parametrize("user_id", ["a", "user_1-2.3:4@x", "x" * 128])
def test_good_identifiers_pass(user_id: str) -> None:
    assert RecallRequest(user_id=user_id, query="q").user_id == user_id


def test_at_most_200_messages() -> None:
    message = {"role": "user", "content": "hi"}
    AddRequest(user_id="u", messages=[message] * 200)
    with pytest.raises(ValidationError):
        AddRequest(user_id="u", messages=[message] * 201)
    with pytest.raises(ValidationError):
        AddRequest(user_id="u", messages=[])


def test_unknown_fields_and_roles_are_refused() -> None:
    with pytest.raises(ValidationError):
        RecallRequest(user_id="u", query="q", surprise=1)
    with pytest.raises(ValidationError):
        AddRequest(user_id="u", messages=[{"role": "function", "content": "x"}])


def test_tool_is_a_message_role() -> None:
    request = AddRequest(user_id="u", messages=[{"role": "tool", "content": "x"}])
    assert request.messages[0].role is Role.TOOL


def test_scope_levels_need_their_ids() -> None:
    base = {"user_id": "u", "ownership": "USER", "mem_type": "SEMANTIC", "content": "c"}
    with pytest.raises(ValidationError):
        AddStructuredRequest(**base, level="APP")
    with pytest.raises(ValidationError):
        AddStructuredRequest(**base, level="SESSION", app_id="a")
    AddStructuredRequest(**base, level="SESSION", session_id="s")
    with pytest.raises(ValidationError):
        AddStructuredRequest(**{**base, "content": "   "})


def test_memory_ids_and_update_contents() -> None:
    with pytest.raises(ValidationError):
        BatchDeleteRequest(user_id="u", memory_ids=["not-an-id"])
    with pytest.raises(ValidationError):
        UpdateRequest(user_id="u", memory_id=MEMORY_ID)  # nothing to change
    assert UpdateRequest(user_id="u", memory_id=MEMORY_ID, expire_at=None).expire_at is None
    with pytest.raises(ValidationError):
        ChangeLogRequest(user_id="u", cursor="1 OR 1=1")


def test_recall_limits() -> None:
    with pytest.raises(ValidationError):
        RecallRequest(user_id="u", query="q", top_k=101)
    with pytest.raises(ValidationError):
        RecallRequest(user_id="u", query="")
    with pytest.raises(ValidationError):
        RecallRequest(user_id="u", query="q", as_of="2024-01-01T00:00:00")  # naive time is ambiguous


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ErrorCode.OK, 200),
        (ErrorCode.NO_RELEVANT_MEMORY, 200),
        (ErrorCode.BAD_PARAMETER, 400),
        (ErrorCode.UNAUTHENTICATED, 401),
        (ErrorCode.CROSS_APP_NOT_ENABLED, 403),
        (ErrorCode.NOT_FOUND, 404),
        (ErrorCode.IMPORTANT_LIMIT_EXCEEDED, 429),
        (ErrorCode.EXTRACTION_FAILED, 500),
        (ErrorCode.DEPENDENCY_UNAVAILABLE, 503),
        (ErrorCode.RECALL_TIMEOUT, 504),
    ],
)
def test_http_status_mirrors_the_code_class(code: ErrorCode, status: int) -> None:
    assert code.http_status == status
