"""``watcher-bridge``: the watcher CLI with every answer as one JSON envelope on stdout.

``watcher-bridge mcp`` serves the same commands as MCP tools over stdio.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["mcp"]:
        from bridge.mcp_server import serve

        serve(args[1:])
        return
    from watcher.cli import main as watcher_main

    watcher_main(args, entrypoint="bridge")
