"""``watcher-bridge``: the watcher CLI with every answer as one JSON envelope on stdout.

``watcher-bridge mcp`` serves the same commands as MCP tools over stdio.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from watcher.cli.argv import hoist_global_options

if TYPE_CHECKING:
    from watcher.pipeline import Hooks


def main(argv: Sequence[str] | None = None, *, hooks: Hooks | None = None) -> None:
    """Console entry point of ``watcher-bridge``: ``mcp`` serves MCP over stdio, anything else is
    :func:`watcher.cli.app.main` answering with one envelope. ``hooks`` go to those commands, as
    there; the MCP server builds each tool call's own (its progress notifications)."""
    # Global options may stand before or after the command (`--data-dir X mcp`, `mcp --data-dir X`).
    args = hoist_global_options(list(sys.argv[1:] if argv is None else argv))
    command = next(
        (
            i
            for i, a in enumerate(args)
            if not a.startswith("-") and (i == 0 or args[i - 1] != "--data-dir")
        ),
        None,
    )
    if command is not None and args[command] == "mcp":
        from bridge.mcp_server import serve

        serve(args[:command] + args[command + 1 :])
        return
    # Imported here: `mcp` never needs typer or the CLI (bench/run.py figure 5c).
    from watcher.cli.app import main as watcher_main

    watcher_main(args, entrypoint="bridge", hooks=hooks)
