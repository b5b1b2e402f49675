"""The README's library example, run as a user would: its own process, in an empty directory."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"


def _example() -> str:
    section = README.read_text().split("## Using the core as a library", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "the README's library section has no python block"
    return match.group(1)


def test_the_readme_library_example_runs_and_remembers(tmp_path: Path) -> None:
    code = _example()
    assert "build_core(" in code, "the example builds its core at the composition root"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "出门习惯打车" in out, out  # recalled across languages
    assert "status=<TaskStatus.DONE" in out and "Hangzhou" in out, out  # the conversation's fact
    assert (tmp_path / "engram-data").is_dir()
