"""The global options' place on a command line, shared by ``watcher`` and ``watcher-bridge``.

click parses a group's options (typer's callback) only before the command's name. Declaring them
again on every command, hidden, would accept them after it too, but click then offers the hidden
names for any mistyped option ("No such option: --bogus (Possible options: --verbose)"); so the
command line is put in click's order first, here.
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
