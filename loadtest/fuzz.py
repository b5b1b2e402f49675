"""The HTTP contract fuzzed with schemathesis against a live app's OpenAPI document (#17).

Every operation gets generated bodies, valid and invalid; then sequences of calls follow the
document's links (add -> task, add_structured -> update / history / delete, update -> history,
user/export -> task: ``serve.operations``), so ids that exist reach the operations that read and
change them. Each answer must be no server error (a recall past its own ``timeout_ms`` answers
504 / 50401 by contract, SPEC R5, and is not one) and must match the documented response schema
for its status. The e2e suite runs a bounded round; the long run is

    engram bench fuzz --max-examples 650 [--url http://127.0.0.1:8000]

which starts an app of its own when no URL is given and prints one JSON report.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from schemathesis import GenerationMode
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
    # Steps of the stateful run that followed a link, by link; and those answered with code 0.
    linked_steps: Counter[str] = field(default_factory=Counter)
    linked_ok: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data."""
        # Not dataclasses.asdict: it rebuilds a Counter from (key, count) pairs, counting the pairs.
        return {
            "requests": self.requests,
            "operations": self.operations,
            "by_operation": dict(self.by_operation),
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "failures": self.failures,
            "linked_steps": dict(self.linked_steps),
            "linked_ok": dict(self.linked_ok),
        }

    def check(self, name: str, response: Any) -> None:
        """Count one answer; AssertionError when it is a server error."""
        self.by_operation[name] += 1
        self.statuses[response.status_code] += 1
        if response.status_code >= 500:
            code = response.json().get("code")
            timed_out = response.status_code == 504 and code == 50401
            assert timed_out, f"server error {response.status_code}: {response.text[:300]}"


_CHECKS = [response_schema_conformance, status_code_conformance]


def fuzz(url: str, max_examples: int, scenarios: int | None = None) -> FuzzReport:
    """Run ``scenarios`` linked sequences (default: ``max_examples``) against the app at ``url``,
    then fuzz every operation; failures are collected, not raised."""
    schema = schemathesis.openapi.from_url(f"{url.rstrip('/')}/openapi.json")
    report = FuzzReport()
    # Linked sequences first: the stateless round switches generated users off (user/switch),
    # after which their adds are refused and no add -> task sequence could run.
    try:
        _fuzz_links(schema, max_examples if scenarios is None else scenarios, report)
    except Exception as exc:
        report.failures["stateful"] = f"{type(exc).__name__}: {str(exc)[:2000]}"
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


def _fuzz_links(schema: Any, scenarios: int, report: FuzzReport) -> None:
    # Only the document's own links: an inferred one (task -> export download) made ``task`` the
    # only operation schemathesis starts a sequence from, and no add ever ran.
    schema.config.phases.stateful.inference.algorithms = []
    # Valid bodies only: invalid ones stop a sequence at its first step, and the stateless round
    # has sent them already.
    schema.config.phases.stateful.generation.modes = [GenerationMode.POSITIVE]
    base = schema.as_state_machine()

    class LinkedCalls(base):  # type: ignore[misc, valid-type]
        def step(self, input: Any) -> Any:
            output = super().step(input)
            if input.transition is not None and input.is_applied:
                report.linked_steps[input.transition.id] += 1
                if output.response.status_code == 200 and output.response.json().get("code") == 0:
                    report.linked_ok[input.transition.id] += 1
            return output

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"timeout": 60}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            report.check(f"{case.operation.method.upper()} {case.operation.path}", response)
            case.validate_response(response, checks=_CHECKS)

    LinkedCalls.run(
        settings=hypothesis_settings(
            max_examples=scenarios,
            stateful_step_count=6,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
    )


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
        report.check(name, response)
        case.validate_response(response, checks=_CHECKS)

    check()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m engram.loadtest.fuzz`` (``engram bench fuzz``): 0 when no request failed a check."""
    parser = argparse.ArgumentParser(prog="engram bench fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=100, help="generated requests per operation")
    parser.add_argument("--scenarios", type=int, help="linked call sequences (default: --max-examples)")
    parser.add_argument("--url", help="an Engram app already running (default: start one here)")
    args = parser.parse_args(argv)
    started: tuple[str, Any] | None = None
    url = args.url
    if url is None:
        from engram.loadtest.run import _start_app

        started = _start_app(1, 1, None)
        url = started[0]
    try:
        report = fuzz(url, args.max_examples, args.scenarios)
    finally:
        if started is not None:
            from engram.loadtest.run import _stop_app

            _stop_app(started[1])
    print(json.dumps(report.as_dict()))
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
