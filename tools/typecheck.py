"""mypy strict over Engram as installed: each file under its import name, at its one path (#28).

The design's folders (``actors/``, ``serve/``, ...) are installed as ``engram.actors``, ... by the
``package-dir`` mapping in pyproject.toml. mypy resolves imports by directory names only, so it is
given every module of that mapping as a source with its import name; it then never needs to look
one up, and it reports ``actors/x.py``, the path an editor opens. Run as ``python tools/typecheck.py``
(``make lint``); extra arguments go to mypy.
"""

from __future__ import annotations

import os
import sys
import time
import tomllib
from pathlib import Path

from mypy.fscache import FileSystemCache
from mypy.main import process_options, run_build
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parents[1]


def package_dirs(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, Path]:
    """Each package setuptools installs, with the folder it is installed from."""
    config = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]
    mapping: dict[str, str] = config["package-dir"]
    folders: dict[str, Path] = {}
    for package in config["packages"]:
        # setuptools' rule: the longest mapped prefix, the rest of the name as folders below it.
        prefix = max((p for p in mapping if package == p or package.startswith(p + ".")), key=len)
        rest = package[len(prefix) :].lstrip(".").split(".") if package != prefix else []
        folders[package] = ROOT.joinpath(mapping[prefix], *rest)
    return folders


def sources(folders: dict[str, Path]) -> list[BuildSource]:
    """One mypy source per module file, named as it is imported."""
    found: list[BuildSource] = []
    for package, folder in sorted(folders.items()):
        for path in sorted(folder.glob("*.py")):
            module = package if path.stem == "__init__" else f"{package}.{path.stem}"
            found.append(BuildSource(str(path.relative_to(ROOT)), module, None, str(ROOT)))
    return found


def main(argv: list[str]) -> int:
    """Type-check the mapped packages with pyproject.toml's mypy settings; mypy's exit status."""
    t0 = time.time()
    # pyproject.toml's settings are found, and paths reported, relative to the checkout.
    os.chdir(ROOT)
    fscache = FileSystemCache()
    # Only the options are wanted; the target named here is replaced by the mapped sources.
    _, options = process_options(["-c", "", *argv], fscache=fscache)
    checked = sources(package_dirs())
    _, messages, blockers = run_build(checked, options, fscache, t0, sys.stdout, sys.stderr)
    errors = [m for m in messages if ": error:" in m]
    if blockers or errors:
        files = {m.split(":", 1)[0] for m in errors}
        print(f"Found {len(errors)} errors in {len(files)} files", file=sys.stderr)
        return 2 if blockers else 1
    print(f"Success: no issues found in {len(checked)} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
