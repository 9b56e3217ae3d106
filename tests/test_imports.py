"""The modules of watcher and bridge import one another without a cycle (STYLE rule 13: a reader
following a run only ever goes down the layers).

The graph is read from each module's source, not from ``sys.modules``, so it has every import a
reader meets: at the top, under ``if TYPE_CHECKING:`` and inside functions. Importing
``a.b.c`` from outside package ``a.b`` runs ``a/b/__init__.py`` too, so that is an edge to
``a.b`` as well. A provider factory named by a string in the registry is data, not an edge.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("watcher", "bridge")

# Edges that close a cycle today, each with the reason it is still there. Empty: none does.
KNOWN_CYCLE_EDGES: frozenset[tuple[str, str]] = frozenset()


def _modules(root: Path, packages: Iterable[str]) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's ``__init__``)."""
    found: dict[str, tuple[Path, bool]] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _named(node: ast.AST, module: str, is_package: bool, known: Mapping[str, object]) -> list[str]:
    """The modules an import statement names: ``from p import m`` names p.m when m is a module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = _absolute(node, module, is_package)
        return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    return []


def import_graph(root: Path, packages: Iterable[str]) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports anywhere in its source."""
    modules = _modules(root, packages)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for module, (path, is_package) in modules.items():
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            for target in _named(node, module, is_package, modules):
                while target and target not in modules:  # `from watcher.x import name`: the module x
                    target = target.rpartition(".")[0]
                if not target or target == module:
                    continue
                graph[module].add(target)
                parts = target.split(".")
                for i in range(1, len(parts)):  # the packages whose __init__ this import runs
                    package = ".".join(parts[:i])
                    if package in modules and module != package and not module.startswith(package + "."):
                        graph[module].add(package)
    return graph


def find_cycle(graph: Mapping[str, set[str]], ignore: frozenset[tuple[str, str]] = frozenset()) -> list[str]:
    """One import cycle as ``[a, b, …, a]``, or ``[]`` when there is none."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(module: str) -> list[str]:
        path.append(module)
        on_path.add(module)
        for target in sorted(graph[module]):
            if (module, target) in ignore:
                continue
            if target in on_path:
                return [*path[path.index(target):], target]
            if target not in done and (cycle := visit(target)):
                return cycle
        on_path.discard(path.pop())
        done.add(module)
        return []

    for module in sorted(graph):
        if module not in done and (cycle := visit(module)):
            return cycle
    return []


def test_no_import_cycle_among_watcher_and_bridge_modules() -> None:
    """No module imports, directly or through others, a module that imports it back."""
    cycle = find_cycle(import_graph(REPO, PACKAGES), KNOWN_CYCLE_EDGES)
    assert cycle == [], " -> ".join(cycle)


def test_known_cycle_edges_are_still_imports() -> None:
    """An edge listed as known must still exist; a fixed one is taken off the list."""
    graph = import_graph(REPO, PACKAGES)
    assert {(a, b) for a, b in KNOWN_CYCLE_EDGES if b not in graph.get(a, set())} == set()


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, "utf-8")
    return root


def test_a_cycle_through_a_type_checking_import_is_found(tmp_path: Path) -> None:
    """An import only under TYPE_CHECKING, or inside a function, still closes a cycle."""
    root = _package(tmp_path, {
        "p/__init__.py": "",
        "p/config.py": "from p.registry import TABLE\n",
        "p/registry.py": ("from typing import TYPE_CHECKING\n"
                          "if TYPE_CHECKING:\n    from p.config import Settings\n"),
        "p/lazy.py": "def f():\n    from . import config\n",
    })
    assert find_cycle(import_graph(root, ["p"])) == ["p.config", "p.registry", "p.config"]
    (root / "p/registry.py").write_text("TABLE = {}\n", "utf-8")
    assert find_cycle(import_graph(root, ["p"])) == []


def test_a_cycle_through_a_package_init_is_found(tmp_path: Path) -> None:
    """Importing p.sub.x from outside p.sub runs p/sub/__init__.py: an edge to it too."""
    root = _package(tmp_path, {
        "p/__init__.py": "",
        "p/config.py": "import p.sub.registry\n",
        "p/sub/__init__.py": "from p.sub import registry\nfrom p.config import Settings\n",
        "p/sub/registry.py": "from p.sub import helper\n",
        "p/sub/helper.py": "",
    })
    assert find_cycle(import_graph(root, ["p"])) == ["p.config", "p.sub", "p.config"]
