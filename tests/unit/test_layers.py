"""The import layers hold (DESIGN.md), and the check would notice if they did not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.layers import (
    attribute_forwarding,
    breaches,
    cycles,
    main,
    oversized_modules,
    sql_outside_storage,
    wiring_outside_the_root,
)

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_project_keeps_its_layers() -> None:
    assert [str(b) for b in breaches(ROOT)] == []


def test_upward_and_sideways_imports_are_found_deferred_ones_too(tmp_path: Path) -> None:
    files = {
        "models/rules/decay.py": "import math\nfrom engram.models.domain import Memory\n",
        "models/api.py": "from engram.storage.vectors import VectorRecord\n",
        "actors/ingest.py": "from models.rules import decay\nfrom engram.lifecycle.sweeps import Sweeper\n",
        "lifecycle/job.py": "def run():\n    from engram.serve.shard import ShardActor\n",
        "serve/cli.py": "import engram.loadtest.run\nfrom . import auth\n",
        "loadtest/run.py": "from serve.app import deploy\n",
    }
    _write_tree(tmp_path, files)
    found = {(b.importer, b.imported, b.line) for b in breaches(tmp_path)}
    assert found == {
        ("models.api", "storage", 1),
        ("actors.ingest", "lifecycle", 2),
        ("lifecycle.job", "serve", 2),
        ("serve.cli", "loadtest", 1),
    }
    assert main([str(tmp_path)]) == 1
    assert main([str(ROOT)]) == 0


def test_import_cycles_are_found_deferred_imports_included(tmp_path: Path) -> None:
    files = {
        "serve/__init__.py": "",
        "serve/http_app.py": "from engram.serve.auth import AuthGuard\n",
        "serve/auth.py": "def refuse():\n    from serve.http_app import envelope\n",
        "serve/client.py": "from engram.serve import privacy_client\n",
        "serve/privacy_client.py": "from .client import Call\n",
        "serve/leaf.py": "from serve.http_app import app\n",
    }
    _write_tree(tmp_path, files)
    assert cycles(tmp_path) == [
        ["serve.auth", "serve.http_app"],
        ["serve.client", "serve.privacy_client"],
    ]
    assert main([str(tmp_path)]) == 1
    assert cycles(ROOT) == []


def test_serve_forwards_no_attribute_through_getattr(tmp_path: Path) -> None:
    assert attribute_forwarding(ROOT) == []
    files = {
        "serve/gate.py": "class Gated:\n    def __getattr__(self, name):\n        return 1\n",
        "serve/lazy.py": "def __getattr__(name):\n    return 2\n",
        "actors/proxy.py": "class Fine:\n    def __getattr__(self, name):\n        return 3\n",
    }
    _write_tree(tmp_path, files)
    assert attribute_forwarding(tmp_path) == [
        "serve/gate.py:2: forwards through __getattr__",
        "serve/lazy.py:1: forwards through __getattr__",
    ]
    assert main([str(tmp_path)]) == 1


def test_sql_stays_in_storage(tmp_path: Path) -> None:
    assert sql_outside_storage(ROOT) == []
    files = {
        "lifecycle/queries.py": "from sqlalchemy import select\n",
        "actors/memory.py": "async def f(tx):\n    await tx." + "conn" + ".execute(1)\n",
        "serve/job.py": "def g():\n    import sqlalchemy.ext.asyncio\n",
        "storage/repo.py": "from sqlalchemy import select\nasync def f(tx):\n    return tx." + "conn" + "\n",
    }
    _write_tree(tmp_path, files)
    assert sql_outside_storage(tmp_path) == [
        "actors/memory.py:2: reaches a connection (its conn) outside storage",
        "lifecycle/queries.py:1: imports SQLAlchemy outside storage",
        "serve/job.py:2: imports SQLAlchemy outside storage",
    ]
    assert main([str(tmp_path)]) == 1


def test_the_core_is_wired_only_at_its_composition_root(tmp_path: Path) -> None:
    assert wiring_outside_the_root(ROOT) == []
    files = {
        "serve/shard.py": (
            "def start(service, core):\n"
            "    path = WritePath(service)\n"
            "    backend = LocalBackend(service, path)\n"
            "    path.on_change = print\n"
            "    path.handlers['export'] = print\n"
            "    return LocalBackend(core)\n"
        ),
        "loadtest/bench.py": "def f(s, m, v, e):\n    return MemoryService(s, m, v, e)\n",
        "serve/memory_core.py": "def build(s):\n    service = MemoryService(s)\n    service.summarize = 1\n",
        "actors/write_path.py": "class WritePath:\n    def __init__(self):\n        self.on_change = None\n",
    }
    _write_tree(tmp_path, files)
    assert wiring_outside_the_root(tmp_path) == [
        "loadtest/bench.py:2: builds MemoryService outside serve/memory_core.py",
        "serve/shard.py:2: builds WritePath outside serve/memory_core.py",
        "serve/shard.py:3: builds LocalBackend outside serve/memory_core.py",
        "serve/shard.py:4: sets the hook on_change outside serve/memory_core.py",
        "serve/shard.py:5: sets the hook handlers outside serve/memory_core.py",
    ]
    assert main([str(tmp_path)]) == 1


def test_no_module_outgrows_one_sitting(tmp_path: Path) -> None:
    assert oversized_modules(ROOT) == []
    _write_tree(
        tmp_path,
        {
            "actors/long.py": "x = 1\n" * 401,
            "actors/fits.py": "x = 1\n" * 400,
            "storage/migrations/versions/0001_initial.py": "x = 1\n" * 900,
        },
    )
    assert oversized_modules(tmp_path) == ["actors/long.py: 401 lines (over 400)"]
    assert main([str(tmp_path)]) == 1
