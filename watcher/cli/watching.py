"""``watcher watch`` on the command line (SPEC §16.2): the loop of :mod:`watcher.commands.watch`
around the ``cron`` entry as the front end answers it — each round printed as ``watcher cron``
prints it, its stderr lines carrying the time.

Not a registry entry: a registry command answers once, and ``watch`` answers once a round, for
as long as it runs. The person's own (a terminal, a service): the bridge does not offer it.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from watcher.cli.frontend import Frontend
from watcher.commands.watch import DEFAULT_EVERY

HELP = (
    "Run `watcher cron`'s round now and then every interval, in the foreground, until Ctrl-C or "
    "SIGTERM:\nfor a terminal, a systemd user service, a launchd agent or a container "
    "(`watcher schedule`\nprints the unit). Each round prints what cron prints; stderr lines "
    "carry the time. Never two\nrounds of one data dir at once; each interval, start to "
    "start, is jittered ±10 %."
)
EPILOG = (
    "\b\nExamples:\n  watcher watch\n  watcher watch --every 30m\n  watcher watch --once\n\n"
    "Exit codes: --once: the round's, as cron's · 2 bad --every · 130/143 stopped by "
    "Ctrl-C/SIGTERM"
)


def add_watch(app: typer.Typer) -> None:
    """Add ``watch`` to ``app`` (the ``watcher`` app; the bridge has none)."""

    @app.command("watch", help=HELP, epilog=EPILOG, short_help="Run cron's round every interval.")
    def watch(
        ctx: typer.Context,
        every: Annotated[
            str,
            typer.Option(
                "--every",
                metavar="DURATION",
                help="Time between rounds: 1m to 1d (90s, 10m, 1h30m).",
                show_default=True,
            ),
        ] = DEFAULT_EVERY,
        once: Annotated[bool, typer.Option("--once", help="Run one round and exit.")] = False,
        limit: Annotated[
            int,
            typer.Option(
                "--limit",
                metavar="N",
                help="Most model calls for scan, and again for recheck, each round (1–20).",
                show_default=True,
            ),
        ] = 5,
    ) -> None:
        frontend = ctx.obj
        assert isinstance(frontend, Frontend)
        raise typer.Exit(run_watch(frontend, every=every, once=once, limit=limit))


def run_watch(frontend: Frontend, *, every: str, once: bool, limit: int) -> int:
    from watcher.commands.cron import CRON
    from watcher.commands.watch import Stamped, parse_every, watch
    from watcher.config import data_paths
    from watcher.errors import WatcherError
    from watcher.store.outbox import round_lock

    try:
        interval = parse_every(every)
        paths = data_paths(data_dir=frontend.data_dir)
    except WatcherError as exc:
        frontend._notice(f"error: {exc}")
        return exc.exit_code

    def one_round() -> int:
        try:
            frontend.respond(CRON, {"limit": limit}, as_json=False)
        except typer.Exit as done:
            return int(done.exit_code)
        return 0

    stderr = sys.stderr
    sys.stderr = Stamped(stderr)
    try:
        return watch(
            one_round,
            every=interval,
            once=once,
            round_lock=lambda: round_lock(paths),
            say=lambda line: frontend._notice(line),
        )
    finally:
        sys.stderr = stderr
