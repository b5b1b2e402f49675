"""The HTTP contract fuzzed with schemathesis against a live app's OpenAPI document (#17).

Every operation gets generated bodies, valid and invalid; then sequences of calls follow the
document's links (add -> task, add_structured -> update / history / delete, update -> history,
user/export -> task: ``serve.operations``), so ids that exist reach the operations that read and
change them. Each answer must be no server error (a recall past its own ``timeout_ms`` answers
504 / 50401 by contract, SPEC R5, and is not one) and must match the documented response schema
for its status, and must be the envelope with a documented code (C9) whose class is the HTTP
status. Then an edge round (issue #27) sends every operation what the schema alone never makes:
bodies that are not one JSON object (malformed, an array, nested far past the depth limit, NaN),
and valid bodies with one value pushed past the stores' range (a naive or year-9999 datetime, an
integer past 64 bits, a 19-digit cursor, import lines with such values); all must be 40001.
Generated date-times include naive ones and every year from 1 to 9999. The e2e suite runs a
bounded round; the long run is

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

import requests
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core.result import Err
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from engram.loadtest.fuzz_cases import date_times, edge_bodies, spoil, top_fields
from engram.models.errors import ErrorCode
from engram.serve.cli.options import positive_int

NDJSON = "application/x-ndjson"
HEALTH = "GET /healthz"
DOCUMENTED = {int(code) for code in ErrorCode}
# Generated date-times span every year and include naive ones (the edge round's cases).
schemathesis.openapi.format("date-time", date_times())


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
    # Answers that were no envelope, had a code outside C9, or an HTTP status not its code's class.
    undocumented: int = 0
    # Requests of the edge round (issue #27), all of which must be 40001.
    edge_requests: int = 0

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
            "undocumented": self.undocumented,
            "edge_requests": self.edge_requests,
        }

    def check(self, name: str, response: Any) -> int | None:
        """Count one answer and return its code; AssertionError when it is a server error or not
        the envelope with a documented code and that code's HTTP status."""
        self.by_operation[name] += 1
        self.statuses[response.status_code] += 1
        if name == HEALTH or (response.status_code == 200 and _content_type(response).startswith(NDJSON)):
            return None  # the health check's {"status": "ok"}, the export download's stream
        code = envelope_code(response)
        if code is None or code not in DOCUMENTED or ErrorCode(code).http_status != response.status_code:
            self.undocumented += 1
            raise AssertionError(f"not a documented answer: {response.status_code} {response.text[:300]}")
        if response.status_code >= 500:
            timed_out = response.status_code == 504 and code == 50401
            assert timed_out, f"server error {response.status_code}: {response.text[:300]}"
        return code


def _content_type(response: Any) -> str:
    # schemathesis' responses hold a list of values per header, requests' one string.
    value = response.headers.get("content-type") or response.headers.get("Content-Type") or ""
    return str(value[0] if isinstance(value, list) and value else value)


def envelope_code(response: Any) -> int | None:
    """The ``code`` of an answer that is the envelope ``{code, msg, trace_id, data}``, else None."""
    try:
        payload = response.json()
    except ValueError:
        return None
    if not isinstance(payload, dict) or set(payload) != {"code", "msg", "trace_id", "data"}:
        return None
    code = payload["code"]
    return code if isinstance(code, int) and not isinstance(code, bool) else None


_CHECKS = [response_schema_conformance, status_code_conformance]


def fuzz(url: str, max_examples: int, scenarios: int | None = None) -> FuzzReport:
    """Run ``scenarios`` linked sequences (default: ``max_examples``) against the app at ``url``,
    then fuzz every operation; failures are collected, not raised."""
    # The same 60 s bound as every request below: a loaded machine builds the document slowly.
    schema = schemathesis.openapi.from_url(f"{url.rstrip('/')}/openapi.json", timeout=60)
    report = FuzzReport()
    # Linked sequences first: the stateless round switches generated users off (user/switch),
    # after which their adds are refused and no add -> task sequence could run.
    try:
        if scenarios != 0:  # 0: no linked sequences (the in-process round, where they are slow)
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
    try:
        _fuzz_edges(schema, url, max_examples, report)
    except Exception as exc:
        report.failures["edges"] = f"{type(exc).__name__}: {str(exc)[:2000]}"
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


def _fuzz_edges(schema: Any, url: str, max_examples: int, report: FuzzReport) -> None:
    """Every operation: the edge bodies, then valid bodies spoiled one kind at a time; all 40001."""
    document = requests.get(f"{url.rstrip('/')}/openapi.json", timeout=60).json()
    for result in schema.get_all_operations():
        if isinstance(result, Err):
            continue
        operation = result.ok()
        name = f"{operation.method.upper()} {operation.path}"
        if operation.method.upper() != "POST":
            continue  # the health check takes no body
        try:
            for label, raw, content_type in edge_bodies():
                response = requests.post(
                    f"{url.rstrip('/')}{operation.path}",
                    data=raw,
                    headers={"content-type": content_type},
                    timeout=60,
                )
                report.edge_requests += 1
                code = report.check(name, response)
                assert code == 40001, f"edge body {label!r} answered {code}: {response.text[:300]}"
            _spoiled_cases(operation, name, top_fields(document, operation), max_examples, report)
        except Exception as exc:
            report.failures[f"edges {name}"] = f"{type(exc).__name__}: {str(exc)[:2000]}"


def _spoiled_cases(
    operation: Any, name: str, kinds: dict[str, str], max_examples: int, report: FuzzReport
) -> None:
    @given(
        case=operation.as_strategy(),
        edit=st.sampled_from(["time", "int", "cursor", "lines"]),
        pick=st.integers(0, 15),
    )
    @hypothesis_settings(
        max_examples=max(1, max_examples // 4),
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def check(case: Any, edit: str, pick: int) -> None:
        changed = spoil(case.body, kinds, edit, pick)
        response = case.call(timeout=60)
        report.edge_requests += 1
        code = report.check(name, response)
        if changed:
            assert code == 40001, f"a {edit} past the range answered {code}: {response.text[:300]}"

    check()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m engram.loadtest.fuzz`` (``engram bench fuzz``): 0 when no request failed a check."""
    parser = argparse.ArgumentParser(prog="engram bench fuzz", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--max-examples", type=positive_int, default=100, help="generated requests per operation"
    )
    parser.add_argument(
        "--scenarios", type=positive_int, help="linked call sequences (default: --max-examples)"
    )
    parser.add_argument("--url", help="an Engram app already running (default: start one)")
    args = parser.parse_args(argv)
    started: tuple[str, Any] | None = None
    url = args.url
    if url is None:
        from engram.loadtest.run import start_app

        started = start_app(1, 1, None)
        url = started[0]
    try:
        report = fuzz(url, args.max_examples, args.scenarios)
    finally:
        if started is not None:
            from engram.loadtest.run import stop_app

            stop_app(started[1])
    print(json.dumps(report.as_dict()))
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
