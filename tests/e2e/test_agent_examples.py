"""The examples of docs/agents.md run against the live Serve app (#14)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.e2e.conftest import RunningApp

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_example_of_the_agents_page_exists() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    for name in (
        "mcp_http",
        "mcp_stdio",
        "python_client",
        "ray_handle",
        "pydantic_ai_agent",
        "openai_agents_agent",
        "langgraph_store",
    ):
        assert f"examples/{name}.py" in page and (EXAMPLES / f"{name}.py").is_file()


def test_the_python_client_example(engram_app: RunningApp) -> None:
    assert "I prefer taking a taxi to work." in _example("python_client").main(engram_app.url)


def test_the_mcp_http_example(engram_app: RunningApp) -> None:
    found = _example("mcp_http").main(engram_app.url)
    assert any("Porto" in m["content"] for m in found["memories"])


def test_the_mcp_stdio_example(engram_app: RunningApp) -> None:
    found = _example("mcp_stdio").main(engram_app.url)
    assert set(found) >= {"hit", "memories"}


def test_the_ray_handle_example(engram_app: RunningApp) -> None:
    contents = _example("ray_handle").main(engram_app.settings.serve.app_name)
    assert "My dentist appointment is on Friday at nine." in contents


@pytest.mark.parametrize("name", ["pydantic_ai_agent", "openai_agents_agent"])
def test_the_agent_framework_examples(engram_app: RunningApp, name: str) -> None:
    assert _example(name).main(engram_app.url) == "From memory: I prefer taking a taxi to work."


def test_the_langgraph_store_example(engram_app: RunningApp) -> None:
    assert _example("langgraph_store").main(engram_app.url) == "From memory: I prefer taking a taxi to work."
