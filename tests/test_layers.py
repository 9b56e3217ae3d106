"""A run read top-down never climbs back up a layer (STYLE rule 13): each module imports only
from its own layer and the layers below, functions' lazy imports and ``TYPE_CHECKING`` blocks
included. tests/test_imports.py keeps the graph free of cycles; this keeps its direction."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Bottom first. A module belongs to the longest prefix listed.
LAYERS: list[tuple[str, ...]] = [
    (
        "watcher",
        "watcher.util.timeutil",
        "watcher.errors",
        "watcher.models",
        "watcher.commands.results",
        "watcher.util.urls",
        "watcher.util.visible",
        "watcher.paths",
        "watcher.notify.models",
        "watcher.notify.targets",
    ),
    # pure rules over the models, and the settings (with the provider table they name)
    (
        "watcher.state.records",
        "watcher.state.seen",
        "watcher.providers.prompts",
        "watcher.config",
        "watcher.providers.registry",
        "watcher.providers.base",
    ),
    # the three seams: state, the model, dev.to
    ("watcher.store", "watcher.providers", "watcher.source"),
    # the pipeline, and eval's read of what it left (SPEC §15.6)
    ("watcher.pipeline", "watcher.commands.evaluate", "watcher.notify"),
    # the core commands (a new command's module lands here by itself)
    ("watcher.commands",),
    ("watcher.commands.cron",),
    # the table of every command, which the front ends read
    ("watcher.commands.registry",),
    ("watcher.cli", "watcher.__main__"),
    ("bridge",),
]


def _module(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(name: str) -> int | None:
    best: tuple[int, int] | None = None
    for number, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[1]
            ):
                best = (number, len(prefix))
    return None if best is None else best[0]


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.lineno, node.module)] + [
                (node.lineno, f"{node.module}.{a.name}") for a in node.names
            ]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] in ("watcher", "bridge")]


def upward_imports(root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted([*(root / "watcher").rglob("*.py"), *(root / "bridge").rglob("*.py")]):
        own = _layer(_module(path, root))
        for line, name in _imports(path):
            target = _layer(name)
            if own is not None and target is not None and target > own:
                found.append(
                    f"{_module(path, root)} (layer {own}) imports {name} (layer {target}), line {line}"
                )
    return found


def test_every_module_has_a_layer() -> None:
    """A new module is placed on purpose, not left out of the check."""
    unplaced = [
        _module(p)
        for p in sorted([*(ROOT / "watcher").rglob("*.py"), *(ROOT / "bridge").rglob("*.py")])
        if _layer(_module(p)) is None
    ]
    assert unplaced == []


def test_no_module_imports_from_a_layer_above_it() -> None:
    """Commands call the pipeline, the pipeline calls the seams, the seams the rules and models —
    never the other way round."""
    assert upward_imports() == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The check itself finds a lower module importing a higher one."""
    (tmp_path / "watcher").mkdir()
    (tmp_path / "bridge").mkdir()
    (tmp_path / "watcher" / "state").mkdir()
    (tmp_path / "watcher" / "state" / "records.py").write_text(
        "def f():\n    from watcher.pipeline import batch\n"
    )
    assert upward_imports(tmp_path) == [
        "watcher.state.records (layer 1) imports watcher.pipeline (layer 3), line 2",
        "watcher.state.records (layer 1) imports watcher.pipeline.batch (layer 3), line 2",
    ]
