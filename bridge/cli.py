"""``watcher-bridge``: the watcher CLI with every answer as one JSON envelope on stdout.

``watcher-bridge mcp`` serves the same commands as MCP tools over stdio.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

import watcher
from bridge import leave_quietly
from watcher.cli.app import DATA_DIR_HELP, build_app
from watcher.cli.app import main as watcher_main
from watcher.cli.frontend import Frontend

if TYPE_CHECKING:
    from watcher.pipeline import Hooks


def mcp(
    ctx: typer.Context,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help=DATA_DIR_HELP)] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log each request on stderr.")
    ] = False,
) -> None:
    """Serve the watcher commands as MCP tools over stdio (for Codex and Claude Code)."""
    from bridge import mcp_handshake

    # The global options, wherever they were typed, reach the app's callback
    # (watcher/cli/argv.py); they are listed here too, for `watcher-bridge mcp -h`.
    frontend = ctx.obj
    assert isinstance(frontend, Frontend)
    # Until the server has its own handlers (bridge/mcp_server.py), a signal ends it quietly: no
    # call can be in flight yet.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, leave_quietly)
    opening = None
    if mcp_handshake.sdk_installed():
        # initialize or server/discover answered before the SDK loads (1.1-1.5 s): mcp_handshake.
        from bridge.mcp_text import INSTRUCTIONS

        opening = mcp_handshake.open_session(
            name=mcp_handshake.SERVER_NAME, version=watcher.__version__, instructions=INSTRUCTIONS
        )
    from bridge.mcp_server import serve  # the MCP SDK: only for this command

    serve(
        data_dir=data_dir or frontend.data_dir,
        verbose=verbose or frontend.verbose,
        opening=opening,
    )


def build_bridge() -> typer.Typer:
    """The bridge's typer app: the registry's commands the bridge offers, and ``mcp``."""
    app = build_app("bridge")
    # Not in the command list: the bridge's help says what it is (BRIDGE_HELP).
    app.command("mcp", hidden=True)(mcp)
    return app


def main(argv: Sequence[str] | None = None, *, hooks: Hooks | None = None) -> None:
    """Console entry point of ``watcher-bridge``: :func:`watcher.cli.app.main` answering with one
    envelope, and ``mcp``, which serves MCP over stdio. ``hooks`` go to the commands, as there;
    the MCP server builds each tool call's own (its progress notifications)."""
    if signal.getsignal(signal.SIGINT) is leave_quietly:  # the start-up's (bridge/__init__.py)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    watcher_main(argv, entrypoint="bridge", hooks=hooks, app=build_bridge)
