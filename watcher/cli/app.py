"""``watcher``: the typer app, built from the command registry (:mod:`watcher.commands.registry`).

Each registry entry becomes one typer command: its options and arguments from the entry's
``params``, its help, examples and exit codes, and a body that hands the parsed arguments to
:class:`watcher.cli.frontend.Frontend`, which runs the command and renders its envelope. The
bridge (``watcher-bridge``) runs this same app with a front end that always prints the envelope.
"""

from __future__ import annotations

import functools
import inspect
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
import typer.main

# typer vendors click as typer._click and raises its errors; typer.BadParameter is one of them.
from typer._click.exceptions import ClickException
from typer.core import TyperArgument, TyperCommand

from watcher import __version__
from watcher.cli.argv import hoist_global_options
from watcher.cli.frontend import Frontend
from watcher.commands.envelope import Envelope
from watcher.commands.registry import COMMANDS
from watcher.commands.spec import REQUIRED, Command, Param
from watcher.config import SETTINGS_HELP
from watcher.errors import (
    Interrupted,
    UsageError,
    WatcherError,
    error_kind,
    exit_code_for,
    exit_code_legend,
)
from watcher.pipeline import Hooks


def _settings_help() -> str:
    rows = "\n".join(
        textwrap.fill(
            meaning,
            96,
            break_on_hyphens=False,
            initial_indent=f"  {name:<29} ",
            subsequent_indent=" " * 32,
        )
        for name, meaning in SETTINGS_HELP.items()
    )
    return (
        "\b\nSettings: environment variables, or the same keys in lower case without WATCHER_ in\n"
        "<data-dir>/config.toml (options win over the environment, which wins over the "
        f"file):\n{rows}"
    )


HELP = f"""Triage new dev.to comments with a language model, under a hard budget of 3 model
attempts per comment.

\b
First steps:
  watcher demo                      what it does, on bundled sample comments, offline
  export DEVTO_USERNAME=you WATCHER_PROVIDER=openai OPENAI_API_KEY=sk-...
  watcher check                     test that setup for free (no attempt, no tokens)
  watcher scan && watcher inbox     fetch new comments, then list what needs a reply
  watcher cron                      the same for cron: quiet unless there is news or trouble

{_settings_help()}

Exit codes: {exit_code_legend()}."""


BRIDGE_HELP = f"""The watcher commands for agents (OpenAI Codex, Claude Code): every answer is
exactly one JSON envelope on stdout, and the exit code is the CLI's.

\b
Envelope: {{"ok", "command", "exit_code", "result", "error": {{"kind", "message"}} | null}}
Nothing else is printed on stdout; notices and logs go to stderr; never prompts or colours.

\b
  watcher-bridge mcp [--data-dir DIR] [--verbose]
      serve the same commands as MCP tools over stdio (needs the 'mcp' extra)

grant is refused here: raising a comment's budget is the person's decision (`watcher grant`).

Exit codes: {exit_code_legend()}."""


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"devto-watcher {__version__}\n")
        raise typer.Exit(0)


DATA_DIR_HELP = (
    "Data directory [env WATCHER_DATA_DIR; default the user's data directory, "
    "~/.local/share/devto-watcher on Linux]."
)
JSON = Param(
    name="as_json",
    type=bool,
    default=False,
    flags=("--json",),
    help="Print one JSON document on stdout and nothing else there.",
)


def _parser(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """A registry parser as click expects one: its ``ValueError`` is the option's bad value."""

    def parsed(value: str) -> Any:
        try:
            return parse(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None

    return parsed


def _annotation(param: Param) -> Any:
    """A registry parameter as typer reads one: its type, annotated with its option or argument."""
    info: dict[str, Any] = {"help": param.help, "metavar": param.metavar}
    if param.parser is not None:
        info["parser"] = _parser(param.parser)
    if param.show_default is not None:
        info["show_default"] = param.show_default
    if param.is_option:
        return Annotated[param.type, typer.Option(*param.flags, **info)]
    return Annotated[param.type, typer.Argument(**info)]


def _signature(params: Sequence[Param]) -> inspect.Signature:
    """The signature typer reads a command's parameters from: ``ctx``, then each parameter."""
    return inspect.Signature(
        [
            inspect.Parameter(
                "ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context
            ),
            *(
                inspect.Parameter(
                    p.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=inspect.Parameter.empty if p.default is REQUIRED else p.default,
                    annotation=_annotation(p),
                )
                for p in params
            ),
        ]
    )


def _typer_command(command: Command) -> Callable[..., None]:
    """The function typer makes ``command`` of: its signature is the entry's parameters."""

    def run(ctx: typer.Context, **values: Any) -> None:
        frontend = ctx.obj
        assert isinstance(frontend, Frontend)
        as_json = values.pop("as_json")
        frontend.respond(command, values, as_json=as_json)

    signature = _signature((*command.params, JSON))
    run.__signature__ = signature  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    run.__doc__ = command.help
    run.__name__ = command.name
    return run


def _epilog(command: Command) -> str:
    """A command's examples and exit codes, kept as written (click rewraps text without \\b)."""
    lines = "\n".join(f"  {e}" for e in command.examples)
    return f"\b\nExamples:\n{lines}" + (f"\n\nExit codes: {command.codes}" if command.codes else "")


def build_app(entrypoint: str = "cli") -> typer.Typer:
    """The typer app of ``watcher`` (or, with ``entrypoint="bridge"``, of ``watcher-bridge``):
    one command per registry entry the entry point offers."""
    app = typer.Typer(
        help=BRIDGE_HELP if entrypoint == "bridge" else HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )

    @app.callback()
    def _global(
        ctx: typer.Context,
        data_dir: Annotated[Path | None, typer.Option("--data-dir", help=DATA_DIR_HELP)] = None,
        verbose: Annotated[
            bool, typer.Option("--verbose", "-v", help="Say more on stderr.")
        ] = False,
        no_pager: Annotated[
            bool,
            typer.Option("--no-pager", help="Print long output straight to the terminal."),
        ] = False,
        version: Annotated[
            bool,
            typer.Option(
                "--version", callback=_version, is_eager=True, help="Print the version and exit."
            ),
        ] = False,
    ) -> None:
        # click's obj arrives as main()'s hooks and leaves as the Frontend every command reads.
        hooks = ctx.obj if isinstance(ctx.obj, Hooks) else Hooks()
        ctx.obj = Frontend(
            entrypoint=entrypoint,
            data_dir=data_dir,
            verbose=verbose,
            pager=not no_pager,
            hooks=hooks,
        )

    for command in COMMANDS:
        if entrypoint == "bridge" and not command.bridge:
            continue
        app.command(
            command.name, cls=PlainArguments, short_help=command.summary, epilog=_epilog(command)
        )(_typer_command(command))
    if entrypoint == "cli":  # watch answers once a round, not once: no registry entry (SPEC §16.2)
        from watcher.cli.watching import add_watch

        add_watch(app)
    return app


def main(
    argv: Sequence[str] | None = None,
    *,
    entrypoint: str = "cli",
    hooks: Hooks | None = None,
    app: Callable[[], typer.Typer] | None = None,
) -> None:
    """Console entry point of ``watcher`` (and, with ``entrypoint="bridge"``, of the bridge): run
    ``argv`` (default ``sys.argv[1:]``) as typed, print the answer, raise ``SystemExit`` with the
    exit code.

    ``hooks`` are what this front end hands the pipeline for every command (:class:`Hooks`: the
    store, provider and source factories, the clock, progress callbacks — called before the
    front end's own progress display). The console scripts pass none; a program that runs the
    CLI inside its own process, such as the test suite (tests/README.md), passes its own.
    ``app`` builds the typer app instead of :func:`build_app` (the bridge adds ``mcp``); it is
    built once per process."""
    command = _command(app or _BUILDERS[entrypoint])
    args = hoist_global_options(list(sys.argv[1:] if argv is None else argv))
    prog = "watcher-bridge" if entrypoint == "bridge" else "watcher"
    if entrypoint != "bridge" and not wants_json(args):
        command(args=args, prog_name=prog, obj=hooks)  # click prints usage errors for a person
        return
    # --json and the bridge: every failure is exactly one envelope on stdout (SPEC §13.5, §15.5),
    # also the arguments typer and click refuse before any command runs ("-1" read as an
    # option, "1.5" for a whole number, a missing argument): an agent parsing stdout must never
    # get click's usage text instead.
    try:
        code = command(args=args, prog_name=prog, standalone_mode=False, obj=hooks)
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except ClickException as exc:
        refuse(entrypoint, command_named(args), UsageError(exc.format_message()))
    except typer.Abort:  # Ctrl-C or end of input while click was still parsing
        import signal

        refuse(entrypoint, command_named(args), Interrupted(signal.SIGINT))
    raise SystemExit(code if isinstance(code, int) else 0)


def refuse(entrypoint: str, command: str, error: WatcherError) -> NoReturn:
    """Answer a failure met before any command ran (arguments typer or click refused, the MCP
    server's own options) the way every failure is answered: one envelope, its exit code."""
    envelope: Envelope[Any] = Envelope(
        False,
        command,
        exit_code_for(error),
        None,
        {"kind": error_kind(error), "message": str(error)},
    )
    frontend = Frontend(entrypoint=entrypoint)
    # The CLI also says the error on stderr; the bridge does not.
    frontend.render(envelope, as_json=True)
    if frontend.always_envelope:
        frontend._notice(f"error: {error}")
    sys.stdout.flush()
    raise SystemExit(envelope.exit_code)


def wants_json(args: Sequence[str]) -> bool:
    """Whether ``--json`` stands among the options (before a ``--`` that ends them)."""
    options = list(args)[: list(args).index("--")] if "--" in args else list(args)
    return "--json" in options


def command_at(args: Sequence[str]) -> int | None:
    """Where the command stands in an argument list: its first word that is not an option or the
    value of ``--data-dir``; ``None`` when there is none."""
    return next(
        (
            i
            for i, a in enumerate(args)
            if not a.startswith("-") and (i == 0 or args[i - 1] != "--data-dir")
        ),
        None,
    )


def command_named(args: Sequence[str]) -> str:
    """The command an argument list names ("" when none), for the envelope of a refused command
    line."""
    at = command_at(args)
    return "" if at is None else args[at]


_BUILDERS = {
    entrypoint: functools.partial(build_app, entrypoint) for entrypoint in ("cli", "bridge")
}


@functools.cache
def _command(build: Callable[[], typer.Typer]) -> Callable[..., Any]:
    """The click command typer makes of the app ``build`` returns (what ``app()`` runs), made once
    per app: typer introspects every command's signature for it, and :func:`main` may run many
    times in one process (the test suite)."""
    return typer.main.get_command(build())


class PlainArguments(TyperCommand):
    """A command whose arguments are drawn as click draws them: ``ID`` / ``[ID]...`` in the usage
    line, not typer's ``{ID}``, and no ``<str>`` or ``<list[str]>`` type after an argument's name
    in its help (tests/test_messages.py). Every registry command is of this class (``cls=``)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:  # typer's vendored click.Context
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = param.display_name_raw if param.required else f"[{param.display_name_raw}]"
                pieces.append(name + ("..." if param.nargs != 1 and "..." not in name else ""))
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if isinstance(param, TyperArgument):
                arguments.append((param.display_name_raw, record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
