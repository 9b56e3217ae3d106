"""The ``watcher`` command line: the typer app built from the command registry (``app``), the front
end that runs a command and prints its envelope (``frontend``), and the views a person reads
(``render``, ``views``: tables, wrapped text, the progress display).

``main`` is the console entry point (``watcher = "watcher.cli:main"``).
"""

from __future__ import annotations

from watcher.cli.app import main

__all__ = ["main"]
