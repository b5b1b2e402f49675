"""Errors across Ray boundaries: raised or returned remotely, the caller sees the EngramError itself."""

from __future__ import annotations

import pickle

import pytest
from ray.exceptions import RayTaskError

from engram.models.errors import EngramError, ErrorCode
from engram.serve.remote_errors import engram_cause, unwrap

pytestmark = pytest.mark.unit


async def _value(value: object) -> object:
    return value


async def test_a_returned_error_is_raised_and_a_value_passes() -> None:
    timeout = EngramError(ErrorCode.RECALL_TIMEOUT, "recall did not finish within 500 ms")
    with pytest.raises(EngramError) as raised:
        await unwrap(_value(pickle.loads(pickle.dumps(timeout))))
    assert raised.value.code is ErrorCode.RECALL_TIMEOUT
    assert await unwrap(_value("answer")) == "answer"


async def test_a_raised_error_wrapped_by_ray_is_unwrapped() -> None:
    async def failing() -> object:
        cause = EngramError(ErrorCode.NOT_FOUND, "no memory m1")
        raise RayTaskError("recall", "traceback text", cause)

    with pytest.raises(EngramError) as raised:
        await unwrap(failing())
    assert raised.value.code is ErrorCode.NOT_FOUND
    assert engram_cause(RuntimeError("unrelated")) is None
