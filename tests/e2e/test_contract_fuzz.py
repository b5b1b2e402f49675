"""The HTTP contract fuzzed with schemathesis against the live app's OpenAPI document (#17).

A bounded round for CI (``ENGRAM_FUZZ_EXAMPLES`` per operation, 25 by default); the long run is
``engram bench fuzz --max-examples 650`` (docs/benchmarks.md has its figures).
"""

from __future__ import annotations

import os

import pytest

from engram.loadtest.fuzz import fuzz
from tests.e2e.conftest import RunningApp

pytestmark = pytest.mark.e2e

EXAMPLES = int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "25"))


def test_no_server_error_and_every_answer_as_documented(engram_app: RunningApp) -> None:
    report = fuzz(engram_app.url, EXAMPLES, scenarios=max(EXAMPLES, 40))
    print(f"\nfuzz: {report.requests} requests, {report.operations} operations, {dict(report.statuses)}")
    print(f"links followed: {dict(report.linked_steps)}, answered 0: {dict(report.linked_ok)}")
    assert report.failures == {}
    assert report.operations >= 17, "every route of the contract is in the OpenAPI document"
    assert len(report.by_operation) == report.operations  # every operation was sent requests
    assert report.requests >= report.operations * min(EXAMPLES, 5)
    # The stateful round followed the document's links with ids that exist (add -> task among them).
    assert sum(report.linked_ok.values()) > 0
    assert any("add_to_task" in link for link in report.linked_steps)
