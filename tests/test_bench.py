"""The bench is not run by the suite (speed is never a test), so these keep it runnable: every
figure still resolves against the product, and it reaches watcher only through the entry points
and modules that stay put while the command layer moves (bench/README.md)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"
# The console scripts run as processes; in process, only these packages (and their modules) and
# these two exact modules: ``Run``/``Hooks``/``scan``/``recheck``, and ``watcher.cli:main``.
PACKAGES = (
    "watcher.config",
    "watcher.models",
    "watcher.store",
    "watcher.providers",
    "watcher.source",
)
EXACT = ("watcher.pipeline", "watcher.cli")


def _run_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run", BENCH / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # puts bench/ on sys.path, as `python bench/run.py` does
    return module


def test_every_bench_figure_resolves_against_the_product() -> None:
    """Each figure's module imports and has its function, so `python bench/run.py` can run it."""
    path, modules = list(sys.path), set(sys.modules)
    try:
        figures = _run_module().FIGURES
        for name, (module_name, function, _title) in figures.items():
            module = importlib.import_module(module_name)
            assert callable(getattr(module, function, None)), (
                f"{name}: {module_name}.{function} is gone"
            )
    finally:  # the bench's own modules (startup, batch, …) must not shadow anything later
        sys.path[:] = path
        for added in set(sys.modules) - modules:
            where = getattr(sys.modules[added], "__file__", None) or ""
            if Path(where).parent == BENCH:
                del sys.modules[added]


def test_bench_reaches_watcher_only_through_stable_modules() -> None:
    """No bench file imports a watcher module outside the stable list (e.g. watcher.commands)."""
    reached: set[tuple[str, str]] = set()
    for path in BENCH.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "watcher":
                reached.update((path.name, f"watcher.{alias.name}") for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("watcher."):
                reached.add((path.name, str(node.module)))
            elif isinstance(node, ast.Import):
                reached.update(
                    (path.name, a.name) for a in node.names if a.name.startswith("watcher")
                )
    outside = sorted((f, m) for f, m in reached if not _stable(m))
    assert reached, "the bench imports no watcher module at all: is BENCH the right folder?"
    assert outside == []


def _stable(module: str) -> bool:
    return module in EXACT or any(module == p or module.startswith(p + ".") for p in PACKAGES)
