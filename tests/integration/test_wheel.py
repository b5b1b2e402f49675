"""The built distribution installs one top-level name, ``engram``, and works from it alone (#14)."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # setuptools stages the package in ./build and never empties it: a module deleted since an
    # earlier build would be packaged again.
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", out, ROOT],
        check=True,
        cwd=out,
    )
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    (built,) = out.glob("engram-*.whl")
    return built


def test_the_wheel_holds_one_top_level_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
        assert archive.read(top_level).decode().split() == ["engram"]
    assert {n.split("/")[0] for n in names} == {"engram", wheel.name.split("-")[0] + "-0.1.0.dist-info"}
    # The layers are real files in the wheel (the links in engram/ were followed), migrations included.
    assert "engram/models/api.py" in names
    assert "engram/serve/app.py" in names
    assert any(n.startswith("engram/storage/migrations/versions/") for n in names)
    # The console's files (served at /ui) are package data.
    assert {f"engram/serve/static/{f}" for f in ("index.html", "console.js", "console.css")} <= set(names)


def test_installed_alone_it_imports_as_engram_and_nothing_else(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", target, wheel],
        check=True,
    )
    # No site processing: this checkout's editable install is invisible; dependencies come from
    # the test environment's site-packages, the package from the wheel only.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), *site.getsitepackages()])}

    def run(code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-S", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
        )

    ok = run(
        "import engram; from engram import EngramClient, AsyncEngramClient, Settings, RecallRequest;"
        "print(engram.__file__)"
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().startswith(str(target))
    # The console's files are read from the installed package, as /ui serves them.
    served = "from engram.serve.console import ASSETS as A, asset\nprint(all(map(asset, [*A, 'index.html'])))"
    console = run(served)
    assert console.stdout.strip() == "True", console.stderr
    for generic in ("models", "storage", "actors", "serve", "lifecycle", "loadtest"):
        missing = run(f"import {generic}")
        assert missing.returncode != 0 and "ModuleNotFoundError" in missing.stderr, generic


def test_serving_the_embedded_default_imports_nothing_from_the_extras() -> None:
    # What `make run` installs has no torch, sentence-transformers, llama.cpp, locust or test
    # tools: the service must build its app, embedder and engine without importing any of them.
    blocked = ["torch", "sentence_transformers", "xllamacpp", "locust", "pytest", "schemathesis", "vllm"]
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"
        "from engram.models.settings import Settings\n"
        "from engram.serve import app, cli\n"
        "from engram.storage.embedders import build_embedder\n"
        "from engram.actors.engines.factory import engine_from_settings\n"
        "settings = Settings()\n"
        "build_embedder(settings.embedder).embed(['hello'])\n"
        "engine_from_settings(settings.engine)\n"
        "app.build_http_app(lambda: None, auth=lambda: None, mcp=False)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
