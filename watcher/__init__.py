"""devto-watcher: triage new dev.to comments with a language model, under a hard attempt budget."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

__version__ = "0.3.0"

# Where 0.2.0's top-level modules live now (the packages of docs/design.md, "Where a command
# lives"). Code written against 0.2.0 — scripts, the test suites of that release — still imports
# the old names; each resolves to the one module object, so a patch through either name is seen
# by both. No file stands at the old place.
MOVED = {
    "watcher.argv": "watcher.cli.argv",
    "watcher.render": "watcher.cli.render",
    "watcher.checks": "watcher.commands.checks",
    "watcher.cron": "watcher.commands.cron",
    "watcher.envelope": "watcher.commands.registry",  # the envelope and, now, its result map
    "watcher.evaluate": "watcher.commands.evaluate",
    "watcher.labelled": "watcher.commands.labelled",
    "watcher.results": "watcher.commands.results",
    "watcher.records": "watcher.state.records",
    "watcher.seen": "watcher.state.seen",
    "watcher.prompts": "watcher.providers.prompts",
    "watcher.visible": "watcher.util.visible",
    "watcher.timeutil": "watcher.util.timeutil",
    "watcher.urls": "watcher.util.urls",
    "watcher.threads": "watcher.util.threads",
}


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old name as the module it moved to."""

    def find_spec(
        self, name: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """The module ran when it was imported under its own name."""


if not any(isinstance(finder, _Moved) for finder in sys.meta_path):
    sys.meta_path.append(_Moved())
