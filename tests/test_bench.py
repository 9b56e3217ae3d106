"""The bench is not run by the suite (speed is never a test), so these keep it runnable: every
figure still resolves against the product, and it reaches watcher only through the entry points
and modules that stay put while the command layer moves (bench/README.md)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def _bench_on_path() -> Iterator[ModuleType]:
    """bench/run.py loaded (bench/ on sys.path, as `python bench/run.py` has it), and afterwards
    the path and modules as they were: the bench's own modules (startup, batch, …) must not
    shadow anything later."""
    path, modules = list(sys.path), set(sys.modules)
    try:
        yield _run_module()
    finally:
        sys.path[:] = path
        for added in set(sys.modules) - modules:
            where = getattr(sys.modules[added], "__file__", None) or ""
            if Path(where).parent == BENCH:
                del sys.modules[added]


def test_every_bench_figure_resolves_against_the_product() -> None:
    """Each figure's module imports and has its function, so `python bench/run.py` can run it."""
    with _bench_on_path() as run:
        for name, (module_name, function, _title) in run.FIGURES.items():
            module = importlib.import_module(module_name)
            assert callable(getattr(module, function, None)), (
                f"{name}: {module_name}.{function} is gone"
            )


def test_reach_bench_sees_the_first_rounds_message(tmp_path: Path) -> None:
    """The reach figure's setup as it runs (a `watch --every 1m` process, the fake dev.to, the
    json:// receiver): the first round's message names the comment posted before it, by link."""
    with _bench_on_path():
        reach = importlib.import_module("reach")
        forem, articles = reach._world()
        with reach.watching(tmp_path, forem, "test") as w:
            posted, _at = forem.post(articles[0], "does the cache survive a restart?")
            w.wait(lambda: len(w.arrivals) > 0, 120, "the first round's message")
            named = [reach.comments_named(got) for got in w.arrivals]
    assert named == [{posted}]


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
