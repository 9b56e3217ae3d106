"""The ``watcher`` command line: the typer app built from the command registry, and the views a
person reads (tables, wrapped text, the progress display).

``main`` is the console entry point (``watcher = "watcher.cli:main"``); it is imported on first
use so that ``watcher.cli.argv``, which the MCP server reads, does not bring typer with it.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "main":
        from watcher.cli.app import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
