"""The HTTP contract fuzzed with schemathesis against the live app's OpenAPI document (#17).

Every route gets generated bodies, valid and invalid; every answer must be no server error (a
recall that runs past its own ``timeout_ms`` answers 504 / 50401 by contract, SPEC R5, and is not
one) and must match the documented response schema for its status. Bounded for CI;
``ENGRAM_FUZZ_EXAMPLES=600`` makes the long run (docs/benchmarks.md has its figures).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from tests.e2e.conftest import RunningApp

pytestmark = pytest.mark.e2e

EXAMPLES = int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "25"))


def test_no_server_error_and_every_answer_as_documented(engram_app: RunningApp) -> None:
    schema = schemathesis.openapi.from_url(f"{engram_app.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 17, "every route of the contract is in the OpenAPI document"
    sent: Counter[str] = Counter()
    statuses: Counter[int] = Counter()
    for operation in operations:
        _fuzz(operation, sent, statuses)
    print(f"\nfuzz: {sum(sent.values())} requests, {len(sent)} operations, statuses {dict(statuses)}")
    assert all(sent[f"{o.method.upper()} {o.path}"] for o in operations)


def _fuzz(operation: Any, sent: Counter[str], statuses: Counter[int]) -> None:
    """Send ``EXAMPLES`` generated requests to one operation and check every answer."""
    name = f"{operation.method.upper()} {operation.path}"

    @given(case=operation.as_strategy())
    @hypothesis_settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def check(case: Any) -> None:
        response = case.call(timeout=60)
        sent[name] += 1
        statuses[response.status_code] += 1
        if response.status_code >= 500:
            code = response.json().get("code")
            # A recall past its own timeout_ms is the contract's 504 / 50401, not a fault.
            assert response.status_code == 504 and code == 50401, f"{name}: {response.text[:300]}"
        case.validate_response(response, checks=[response_schema_conformance, status_code_conformance])

    check()
