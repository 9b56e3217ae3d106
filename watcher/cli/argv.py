"""The global options' place on a command line, shared by ``watcher`` and ``watcher-bridge``.

Kept apart from :mod:`watcher.cli.app` so ``watcher-bridge mcp`` can find its command without
importing typer and the CLI it never uses (bench/run.py figure 5c: the start an MCP client waits for).
"""

from __future__ import annotations


def hoist_global_options(args: list[str]) -> list[str]:
    """Let ``--data-dir``/``--verbose`` stand anywhere (``watcher status --data-dir D``), as users
    and agents type them, by moving them before the command name where typer expects them."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        if arg in ("--verbose", "-v") or arg.startswith("--data-dir="):
            front.append(arg)
        elif arg == "--data-dir" and i + 1 < len(args):
            front.extend(args[i : i + 2])
            i += 1
        else:
            rest.append(arg)
        i += 1
    return front + rest
