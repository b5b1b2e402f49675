"""The import layers of DESIGN.md, checked: ``python -m tests.support.layers`` (exit 1 on a breach).

    models (models.rules: the domain rules)  <-  storage  <-  actors | lifecycle  <-  serve  <-  loadtest

A module may import its own package and any package of a lower layer; ``actors`` and ``lifecycle``
share a layer and never import each other; and no modules import each other in a cycle. Every
import counts, deferred ones inside functions too: a deferred import hides a dependency, it does
not remove it.

SQL stays in ``storage`` (#28): no other layer imports SQLAlchemy or reaches a transaction's
connection (its ``conn``); they call the repositories and query modules of ``storage``. The serving
layer forwards nothing through ``__getattr__``: a wrapper writes out each
method it passes on, so mypy follows a call from the route to the backend that answers it.
And no module grows past ``MODULE_LINES`` lines (#28): one a newcomer reads in one sitting.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LAYERS: dict[str, int] = {
    "models": 0,
    "storage": 1,
    "actors": 2,
    "lifecycle": 2,
    "serve": 3,
    "loadtest": 4,
    "integrations": 4,
}
# Installed, the layers are subpackages of the import root (engram.models, ...); the folders of
# the repository are the layers themselves.
ROOT_PACKAGE = "engram."


def _local(name: str) -> str:
    """``engram.serve.auth`` -> ``serve.auth`` (the folder the module lives in)."""
    return name.removeprefix(ROOT_PACKAGE)


@dataclass(frozen=True, slots=True)
class Breach:
    """One import that points up (or sideways) across the layers."""

    path: Path
    line: int
    importer: str
    imported: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.importer} imports {self.imported}"


def imported_packages(source: str, module: str) -> Iterator[tuple[int, str]]:
    """(line, top-level package) of every absolute or relative import in ``source``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, _local(alias.name).split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside the importer's own package
                yield node.lineno, module.split(".")[0]
            elif node.module:
                yield node.lineno, _local(node.module).split(".")[0]


def breaches(root: Path) -> list[Breach]:
    """Every import under ``root``'s layered packages that breaks the layering."""
    found: list[Breach] = []
    for package, rank in LAYERS.items():
        for path in sorted((root / package).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            for line, target in imported_packages(path.read_text(encoding="utf-8"), module):
                if target == package or target not in LAYERS:
                    continue
                if LAYERS[target] >= rank:
                    found.append(Breach(path.relative_to(root), line, module, target))
    return found


def _module_imports(root: Path, path: Path) -> set[str]:
    """The project modules ``path`` imports (``from pkg import mod`` names the module ``pkg.mod``)."""
    module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
    found: set[str] = set()

    def known(name: str) -> bool:
        base = root.joinpath(*name.split("."))
        return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(_local(a.name) for a in node.names if known(_local(a.name)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = module.split(".")[: -node.level] if path.name != "__init__.py" else module.split(".")
                base = ".".join([*parent, *([node.module] if node.module else [])])
            else:
                base = _local(node.module or "")
            for alias in node.names:
                name = f"{base}.{alias.name}"
                if known(name):
                    found.add(name)
                elif known(base):
                    found.add(base)
    found.discard(module)
    return found


def cycles(root: Path) -> list[list[str]]:
    """Groups of project modules that import each other, directly or through others (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for package in LAYERS:
        for path in sorted((root / package).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
            graph[module] = _module_imports(root, path)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


# Layers where an attribute must be found by its name: the request path from route to backend.
NO_ATTRIBUTE_FORWARDING = ("serve",)


def attribute_forwarding(root: Path) -> list[str]:
    """Every ``__getattr__`` (a class's or a module's) in the layers that must not forward."""
    found: list[str] = []
    for package in NO_ATTRIBUTE_FORWARDING:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "__getattr__":
                    found.append(f"{path.relative_to(root)}:{node.lineno}: forwards through __getattr__")
    return found


def sql_outside_storage(root: Path) -> list[str]:
    """Every SQLAlchemy import and access to a transaction's ``conn`` in a layer other than ``storage``."""
    found: list[str] = []
    for package in LAYERS:
        if package == "storage":
            continue
        for path in sorted((root / package).rglob("*.py")):
            where = path.relative_to(root)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module or ""]
                if any(name.split(".")[0] == "sqlalchemy" for name in names):
                    found.append(f"{where}:{node.lineno}: imports SQLAlchemy outside storage")
                if isinstance(node, ast.Attribute) and node.attr == "conn":
                    found.append(f"{where}:{node.lineno}: reaches a connection (its conn) outside storage")
    return found


# The core is built in one module: elsewhere nothing constructs these or sets the hooks between them.
COMPOSITION_ROOT = "serve/memory_core.py"
CORE_CLASSES = ("MemoryService", "WritePath", "LocalBackend")
CORE_HOOKS = ("on_change", "summarize", "handlers")


def wiring_outside_the_root(root: Path) -> list[str]:
    """Every construction of a core class with more than a core as argument, and every hook set
    (``x.on_change = ...``, ``x.handlers[k] = ...``), in the layers outside the composition root."""
    found: list[tuple[str, int, str]] = []
    for package in LAYERS:
        for path in sorted((root / package).rglob("*.py")):
            where = path.relative_to(root)
            if str(where) == COMPOSITION_ROOT:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call):
                    name = (
                        node.func.attr
                        if isinstance(node.func, ast.Attribute)
                        else getattr(node.func, "id", "")
                    )
                    if name in CORE_CLASSES and not (name == "LocalBackend" and len(node.args) == 1):
                        found.append((str(where), node.lineno, f"builds {name}"))
                if isinstance(node, ast.Assign | ast.AugAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        attr = target.value if isinstance(target, ast.Subscript) else target
                        if isinstance(attr, ast.Attribute) and attr.attr in CORE_HOOKS:
                            if isinstance(attr.value, ast.Name) and attr.value.id == "self":
                                continue  # a class setting its own attribute
                            found.append((str(where), node.lineno, f"sets the hook {attr.attr}"))
    return [f"{where}:{line}: {what} outside {COMPOSITION_ROOT}" for where, line, what in sorted(found)]


# Longer modules are split by job (#28); generated files (the database migrations) are exempt.
MODULE_LINES = 400
GENERATED = ("storage/migrations/",)


def oversized_modules(root: Path, limit: int = MODULE_LINES) -> list[str]:
    """Every module of the layers longer than ``limit`` lines, generated files aside."""
    found: list[str] = []
    for package in LAYERS:
        for path in sorted((root / package).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > limit and not where.startswith(GENERATED):
                found.append(f"{where}: {lines} lines (over {limit})")
    return found


def main(argv: list[str] | None = None) -> int:
    """Print each breach, import cycle, ``__getattr__`` forwarder, SQL outside storage and wiring
    outside the composition root; 0 when there is none."""
    root = Path(argv[0] if argv else ".").resolve()
    found = breaches(root)
    loops = cycles(root)
    forwarders = attribute_forwarding(root)
    sql = sql_outside_storage(root)
    wiring = wiring_outside_the_root(root)
    oversized = oversized_modules(root)
    for breach in found:
        print(breach)
    for loop in loops:
        print("import cycle: " + " <-> ".join(loop))
    for line in (*forwarders, *sql, *wiring, *oversized):
        print(line)
    problems = len(found) + len(loops) + len(forwarders) + len(sql) + len(wiring) + len(oversized)
    print(
        f"layers: {len(found)} breaches, {len(loops)} cycles, {len(forwarders)} forwarders, "
        f"{len(sql)} SQL outside storage, {len(wiring)} wirings outside the root, "
        f"{len(oversized)} modules over {MODULE_LINES} lines"
        if problems
        else "layers: ok"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
