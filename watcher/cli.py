"""``watcher``: thin typer commands over :mod:`watcher.commands`.

Each command parses its options, hands one core function to :func:`watcher.commands.execute`,
and renders the envelope: human tables by default, one JSON document with ``--json``. The
bridge (``watcher-bridge``) runs this same app with a front end that always prints the envelope.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from watcher import commands
from watcher.commands import Context, Envelope
from watcher.errors import EXIT_USAGE, exit_code_legend

HELP = f"""Triage new dev.to comments with a language model, under a hard budget of 3 model
attempts per comment.

Exit codes: {exit_code_legend()}."""


@dataclass
class Frontend:
    """How results are shown: ``cli`` (human or --json) or ``bridge`` (always the envelope)."""

    entrypoint: str = "cli"
    data_dir: Path | None = None
    verbose: bool = False

    @property
    def always_envelope(self) -> bool:
        return self.entrypoint == "bridge"

    def run(self, command: str, fn: Callable[[Context], Any], *, as_json: bool, batch: bool = False) -> None:
        ctx = Context(entrypoint=self.entrypoint, data_dir=self.data_dir, notice=self._notice)
        progress = None
        if batch and not self.always_envelope:
            from watcher.pipeline import Hooks
            from watcher.render import BatchProgress

            progress = BatchProgress(verbose=self.verbose)
            ctx.hooks = Hooks(on_planned=progress.start, on_item=progress.advance)
        try:
            envelope = commands.execute(command, ctx, fn)
        finally:
            if progress is not None:
                progress.stop()
        try:
            self.render(envelope, as_json=as_json)
            sys.stdout.flush()
        except BrokenPipeError:
            # `watcher status | head -1`: the reader has what it wanted. End quietly with the
            # command's own code; point stdout at /dev/null so the interpreter's final flush
            # does not fail again at exit.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(envelope.exit_code)

    def render(self, envelope: Envelope, *, as_json: bool) -> None:
        if as_json or self.always_envelope:
            sys.stdout.write(json.dumps(envelope.to_json(), ensure_ascii=False, indent=None if
                                        self.always_envelope else 2) + "\n")
            if envelope.error and not self.always_envelope:
                self._notice(f"error: {envelope.error['message']}")
            return
        from watcher import render

        if envelope.result is not None:
            render.human(envelope.command, envelope.result)
        if envelope.error:
            self._notice(f"error: {envelope.error['message']}")

    def _notice(self, message: str) -> None:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()


def _frontend(ctx: typer.Context) -> Frontend:
    frontend = ctx.obj
    assert isinstance(frontend, Frontend)
    return frontend


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout and nothing else there.")]
LimitOpt = Annotated[int, typer.Option("--limit", help="Most model calls this run (1–20).", show_default=True)]
DryOpt = Annotated[bool, typer.Option("--dry-run", help="Plan and print what would be called; take no lock, "
                                                        "write nothing, call nothing.")]


def build_app(entrypoint: str = "cli") -> typer.Typer:
    app = typer.Typer(help=HELP, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                      rich_markup_mode=None)

    @app.callback()
    def _global(
        ctx: typer.Context,
        data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Data directory "
                                                      "[env WATCHER_DATA_DIR; default ./data].")] = None,
        verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Say more on stderr.")] = False,
    ) -> None:
        ctx.obj = Frontend(entrypoint=entrypoint, data_dir=data_dir, verbose=verbose)

    @app.command()
    def scan(ctx: typer.Context, limit: LimitOpt = commands.DEFAULT_LIMIT, dry_run: DryOpt = False,
             source: Annotated[str | None, typer.Option("--source", help="'devto' (needs DEVTO_USERNAME) or a "
                                                        "Forem-format export FILE; default: devto if configured, "
                                                        "else the bundled sample.")] = None,
             as_json: JsonOpt = False) -> None:
        """Fetch new comments and make the first model attempt for each (at most --limit calls)."""
        _frontend(ctx).run("scan", lambda c: commands.scan(c, limit=limit, dry_run=dry_run, source=source),
                           as_json=as_json, batch=True)

    @app.command()
    def recheck(ctx: typer.Context, ids: Annotated[list[str] | None, typer.Argument(
                    metavar="ID", help="Only these comment ids (default: every failed or interrupted one).")] = None,
                limit: LimitOpt = commands.DEFAULT_LIMIT, dry_run: DryOpt = False, as_json: JsonOpt = False) -> None:
        """Retry failed verdicts with the cached prompt; each comment gets 3 model attempts in all."""
        _frontend(ctx).run("recheck", lambda c: commands.recheck(c, limit=limit, dry_run=dry_run, ids=ids or ()),
                           as_json=as_json, batch=True)

    @app.command()
    def status(ctx: typer.Context, as_json: JsonOpt = False) -> None:
        """Counts by state, cooldown, signal counts, provider and paths."""
        _frontend(ctx).run("status", commands.status, as_json=as_json)

    @app.command("inbox")
    def inbox_cmd(ctx: typer.Context, show_all: Annotated[bool, typer.Option("--all", help="Every known comment, "
                                                                            "not only those needing a reply.")] = False,
                  as_json: JsonOpt = False) -> None:
        """Comments that need a reply (the verdict says so and you have not marked them)."""
        _frontend(ctx).run("inbox", lambda c: commands.inbox_view(c, show_all=show_all), as_json=as_json)

    @app.command()
    def show(ctx: typer.Context, comment_id: Annotated[str, typer.Argument(metavar="ID")],
             as_json: JsonOpt = False) -> None:
        """One comment: its text, verdict and every attempt."""
        _frontend(ctx).run("show", lambda c: commands.show(c, comment_id), as_json=as_json)

    @app.command()
    def mark(ctx: typer.Context, comment_id: Annotated[str, typer.Argument(metavar="ID")],
             triage: Annotated[str, typer.Argument(metavar="replied|ignored|open")], as_json: JsonOpt = False) -> None:
        """Mark a comment replied, ignored or open again. Works while a batch runs."""
        _frontend(ctx).run("mark", lambda c: commands.mark(c, comment_id, triage), as_json=as_json)

    @app.command()
    def check(ctx: typer.Context, as_json: JsonOpt = False) -> None:
        """Check the setup for free: config, API key, the provider and model (its models endpoint,
        no tokens), the dev.to user, the data dir. Exit 0 only if all pass."""
        _frontend(ctx).run("check", commands.check, as_json=as_json)

    @app.command()
    def grant(ctx: typer.Context, comment_id: Annotated[str, typer.Argument(metavar="ID")],
              attempts: Annotated[int, typer.Option("--attempts", help="How many more attempts (1–3).")] = 1,
              as_json: JsonOpt = False) -> None:
        """Give an exhausted or failed comment more model attempts (the cap becomes 3 + grants).

        Your decision as the one who pays: the bridge and the MCP server refuse it."""
        _frontend(ctx).run("grant", lambda c: commands.grant(c, comment_id, attempts=attempts), as_json=as_json)

    @app.command()
    def signals(ctx: typer.Context, reset: Annotated[bool, typer.Option("--reset", help="Recount the whole "
                                                                        "observation log from zero on purpose.")] = False,
                as_json: JsonOpt = False) -> None:
        """Count new observation signals and print the totals per key."""
        _frontend(ctx).run("signals", lambda c: commands.signals_cmd(c, reset=reset), as_json=as_json)

    return app


def main(argv: Sequence[str] | None = None, *, entrypoint: str = "cli") -> None:
    """Console entry point of ``watcher`` (and, with ``entrypoint="bridge"``, of the bridge)."""
    app = build_app(entrypoint)
    args = hoist_global_options(list(sys.argv[1:] if argv is None else argv))
    if entrypoint != "bridge":
        app(args=args, prog_name="watcher")
        return
    try:
        code = app(args=args, prog_name="watcher-bridge", standalone_mode=False)
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except _CLICK_ERROR as exc:
        # Usage errors still answer with exactly one envelope on stdout.
        message = exc.format_message()  # type: ignore[attr-defined]
        envelope = Envelope(False, args[0] if args else "", EXIT_USAGE, None, {"kind": "usage", "message": message})
        sys.stdout.write(json.dumps(envelope.to_json()) + "\n")
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(EXIT_USAGE) from None
    raise SystemExit(code if isinstance(code, int) else 0)


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


# click's base error class, wherever this typer version keeps click (vendored in newer typer).
_CLICK_ERROR: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
