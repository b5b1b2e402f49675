"""The HTTP contract fuzzed with schemathesis against a live app's OpenAPI document (#17).

Every operation gets generated bodies, valid and invalid. Each answer must be no server error (a
recall past its own ``timeout_ms`` answers 504 / 50401 by contract, SPEC R5, and is not one) and
must match the documented response schema for its status. The e2e suite runs a bounded round;
the long run is

    engram bench fuzz --max-examples 650 [--url http://127.0.0.1:8000]

which starts an app of its own when no URL is given and prints one JSON report.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from schemathesis.core.result import Err
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance


@dataclass
class FuzzReport:
    """Requests sent, by operation and by status, and the first failure of each failing operation."""

    requests: int = 0
    operations: int = 0
    by_operation: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    failures: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data."""
        data = asdict(self)
        data["statuses"] = {str(k): v for k, v in sorted(self.statuses.items())}
        return data


def fuzz(url: str, max_examples: int) -> FuzzReport:
    """Fuzz every operation of the app at ``url``; failures are collected, not raised."""
    schema = schemathesis.openapi.from_url(f"{url.rstrip('/')}/openapi.json")
    report = FuzzReport()
    for result in schema.get_all_operations():
        if isinstance(result, Err):
            report.failures[f"schema {report.operations}"] = f"invalid operation: {result.err()}"
            continue
        operation = result.ok()
        report.operations += 1
        name = f"{operation.method.upper()} {operation.path}"
        try:
            _fuzz_operation(operation, name, max_examples, report)
        except Exception as exc:  # a failing example: recorded with its reproduction, then on to the next
            report.failures[name] = f"{type(exc).__name__}: {str(exc)[:2000]}"
    report.requests = sum(report.by_operation.values())
    return report


def _fuzz_operation(operation: Any, name: str, max_examples: int, report: FuzzReport) -> None:
    @given(case=operation.as_strategy())
    @hypothesis_settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def check(case: Any) -> None:
        response = case.call(timeout=60)
        report.by_operation[name] += 1
        report.statuses[response.status_code] += 1
        if response.status_code >= 500:
            code = response.json().get("code")
            timed_out = response.status_code == 504 and code == 50401
            assert timed_out, f"server error {response.status_code}: {response.text[:300]}"
        case.validate_response(response, checks=[response_schema_conformance, status_code_conformance])

    check()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m loadtest.fuzz`` (``engram bench fuzz``): 0 when no request failed a check."""
    parser = argparse.ArgumentParser(prog="engram bench fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=100, help="generated requests per operation")
    parser.add_argument("--url", help="an Engram app already running (default: start one here)")
    args = parser.parse_args(argv)
    started: tuple[str, Any] | None = None
    url = args.url
    if url is None:
        from loadtest.run import _start_app

        started = _start_app(1, 1, None)
        url = started[0]
    try:
        report = fuzz(url, args.max_examples)
    finally:
        if started is not None:
            from loadtest.run import _stop_app

            _stop_app(started[1])
    print(json.dumps(report.as_dict()))
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
