"""The core commands: each a function over a :class:`~watcher.commands.core.Context` that returns
a typed result (:mod:`watcher.commands.results`), run through one
:func:`~watcher.commands.core.execute`
that maps errors to exit codes and wraps the result in the envelope
(:mod:`watcher.commands.envelope`).
"""

from __future__ import annotations

import importlib
from typing import Any

# 0.2.0's ``watcher.commands`` was one module; its names (``commands.status``,
# ``commands.Context``, ``commands.execute``, …) are looked up in the modules that hold them now.
_HOLDERS = ("core", "runs", "reading", "inbox", "person", "claims", "verdicts", "browse", "checks")


def __getattr__(name: str) -> Any:
    for holder in _HOLDERS:
        module = importlib.import_module(f"{__name__}.{holder}")
        if not name.startswith("_") and hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
