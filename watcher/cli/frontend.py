"""How the ``watcher`` front end answers: it runs a command from the registry through
:func:`watcher.commands.core.execute` and prints the envelope — human views by default, one JSON
document with ``--json``, always the envelope for the bridge (``watcher-bridge``).
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from watcher.commands.core import Context, Envelope, execute
from watcher.commands.spec import Args, Command
from watcher.errors import UsageError
from watcher.pipeline import Hooks
from watcher.util.visible import json_safe, visible

if TYPE_CHECKING:
    from watcher.cli.render import BatchProgress


@dataclass
class Frontend:
    """How results are shown: ``cli`` (human or --json) or ``bridge`` (always the envelope), and
    the hooks every command hands the pipeline (:func:`main`'s ``hooks``)."""

    entrypoint: str = "cli"
    data_dir: Path | None = None
    verbose: bool = False
    pager: bool = True  # --no-pager: never page human output (SPEC §16.4)
    hooks: Hooks = field(default_factory=Hooks)

    @property
    def always_envelope(self) -> bool:
        return self.entrypoint == "bridge"

    def respond(self, command: Command, args: Args, *, as_json: bool) -> None:
        """Answer one typed command: run it through :func:`watcher.commands.core.execute` (with a
        progress display for a batch shown to a person), print the envelope, and exit with its
        code (``typer.Exit``)."""
        ctx = Context(
            entrypoint=self.entrypoint,
            data_dir=self.data_dir,
            notice=self._notice,
            ask=_ask_the_person,
            hooks=self.hooks,
        )
        progress = None
        if command.batch and not self.always_envelope:
            from watcher.cli.render import BatchProgress  # rich: only for a batch shown to a person

            progress = BatchProgress(verbose=self.verbose)
            if command.fetching:
                progress.fetching(command.fetching)
            ctx.hooks = _with_progress(self.hooks, progress)
        try:
            envelope = execute(command.name, ctx, lambda c: command.run(c, args))
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

    def render(self, envelope: Envelope[Any], *, as_json: bool) -> None:
        if as_json or self.always_envelope:
            # Exact data, and still nothing a terminal acts on (SPEC §15.5): json_safe spells the
            # characters JSON leaves raw (C1, bidi controls) as escapes of the same characters.
            sys.stdout.write(
                json_safe(
                    json.dumps(
                        envelope.to_json(),
                        ensure_ascii=False,
                        indent=None if self.always_envelope else 2,
                    )
                )
                + "\n"
            )
            if envelope.error and not self.always_envelope:
                self._notice(f"error: {envelope.error['message']}")
            return
        from watcher.cli import render

        if envelope.result is not None:
            render.human(envelope.command, envelope.result, envelope.error, pager=self.pager)
        if envelope.error and not render.says_its_own_errors(envelope.command):
            self._notice(f"error: {envelope.error['message']}")

    def _notice(self, message: str) -> None:
        # Errors and notices quote what servers and payloads said: shown, never obeyed (SPEC §15.5).
        # A person reads local times to the minute (SPEC §15.3); an agent's stderr keeps UTC.
        if not self.always_envelope:
            from watcher.util.timeutil import local_minutes

            message = local_minutes(message)
        message = visible(message)
        if not self.always_envelope and sys.stderr.isatty():
            # A terminal wraps mid-word ("the pro/vider"): wrap at word boundaries to its width.
            # A pipe or a mail gets the whole line. A terminal of 0 columns wraps at 80.
            from watcher.cli.wrap import width as width_of

            width = width_of(sys.stderr)
            message = "\n".join(
                textwrap.fill(line, width, break_long_words=False, break_on_hyphens=False)
                for line in message.splitlines()
            )
        sys.stderr.write(message + "\n")
        sys.stderr.flush()


_T = TypeVar("_T")


def _then(first: Callable[[_T], None] | None, second: Callable[[_T], None]) -> Callable[[_T], None]:
    if first is None:
        return second

    def both(arg: _T) -> None:
        first(arg)
        second(arg)

    return both


def _with_progress(hooks: Hooks, progress: BatchProgress) -> Hooks:
    """``hooks`` with the progress display's callbacks, each called after the caller's own."""
    return replace(
        hooks,
        on_planned=_then(hooks.on_planned, progress.start),
        on_call=_then(hooks.on_call, progress.calling),
        on_item=_then(hooks.on_item, progress.advance),
    )


def _ask_the_person(question: str) -> bool:
    """A grant's confirmation (SPEC §15.5): asked on the terminal, on stderr so --json stays one
    document on stdout. Without a terminal (cron, a script, an agent's shell) nobody can be asked,
    and a grant there must be typed with --yes on purpose: an agent looping on `watcher grant`
    took one comment's cap to 18."""
    if not sys.stdin.isatty():
        raise UsageError(
            "grant asks the person who pays to confirm, and stdin is not a terminal: run it in a "
            "terminal, or add --yes if you are that person (an agent must not)"
        )
    try:
        return typer.confirm(question, default=False, err=True)
    except typer.Abort:  # Ctrl-C or end of input at the question: no
        return False
