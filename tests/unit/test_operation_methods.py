"""The handle methods of the shard actor and the Ingress: written out, one per operation (#28)."""

from __future__ import annotations

import importlib.util
import inspect
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from engram.models.api import TaskRequest
from engram.serve.app import Ingress
from engram.serve.operation_methods import OperationMethods
from engram.serve.operations import OPERATIONS, Operation
from engram.serve.shard import ShardActor

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "operation_methods_tool", ROOT / "tools" / "operation_methods.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_checked_in_module_is_what_the_table_generates() -> None:
    assert _generator().render() == (ROOT / "serve" / "operation_methods.py").read_text()


def test_each_operation_is_a_method_with_its_request_response_and_doc() -> None:
    source = (ROOT / "serve" / "operation_methods.py").read_text()
    for op in OPERATIONS:
        method = getattr(OperationMethods, op.name)
        assert inspect.iscoroutinefunction(method)
        assert f"async def {op.name}(" in source  # found by name, not set at import
        hints = typing.get_type_hints(method)
        assert hints["request"] is op.request
        assert hints["return"] == op.response
        assert " ".join((method.__doc__ or "").split()) == op.doc
    helpers = {"operation_backend", "export_chunk", "memory_apps", "switches", "task_owner"}
    defined = {n for n, v in vars(OperationMethods).items() if inspect.iscoroutinefunction(v)}
    assert defined == {op.name for op in OPERATIONS} | {"operation_backend"}
    inherited = {
        n for n in dir(OperationMethods) if inspect.iscoroutinefunction(getattr(OperationMethods, n))
    }
    assert inherited == defined | helpers


def test_the_shard_actor_and_the_ingress_have_every_method() -> None:
    names = {op.name for op in OPERATIONS} | {"export_chunk", "memory_apps", "switches", "task_owner"}
    # What Ray reads off the actor class when it is decorated: the methods a handle may call.
    actor_methods = set(ShardActor.__ray_metadata__.method_meta.methods)  # type: ignore[attr-defined]
    assert names <= actor_methods
    ingress = Ingress.func_or_class  # type: ignore[attr-defined]
    assert issubclass(ingress, OperationMethods)
    assert all(inspect.iscoroutinefunction(getattr(ingress, name)) for name in names)


async def test_a_method_runs_its_operation_on_the_backend() -> None:
    calls: list[tuple[str, Any]] = []

    class Backend:
        async def call(self, op: Operation[Any, Any], request: Any) -> Any:
            calls.append((op.name, request))
            return op.name

    class Host(OperationMethods):
        async def operation_backend(self) -> Any:
            return Backend()

    request = TaskRequest(task_id="0" * 32)
    assert await Host().task(request) == "task"
    assert calls == [("task", request)]
