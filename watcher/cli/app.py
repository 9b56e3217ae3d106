"""``watcher``: thin typer commands over :mod:`watcher.commands.core`.

Each command parses its options, hands one core function to :func:`watcher.commands.core.execute`,
and renders the envelope: human tables by default, one JSON document with ``--json``. The
bridge (``watcher-bridge``) runs this same app with a front end that always prints the envelope.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
import typer.main
from typer.core import TyperArgument

from watcher import __version__
from watcher.cli.argv import hoist_global_options
from watcher.commands import core as commands
from watcher.commands.core import Context, Envelope
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
from watcher.util.visible import json_safe, visible

if TYPE_CHECKING:
    from watcher.cli.render import BatchProgress
    from watcher.commands.results import MarkResult


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
        f"<data-dir>/config.toml (options win over the environment, which wins over the file):\n{rows}"
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


def _epilog(*examples: str, codes: str = "") -> str:
    """A command's examples and exit codes, kept as written (click rewraps text without \\b)."""
    lines = "\n".join(f"  {e}" for e in examples)
    return f"\b\nExamples:\n{lines}" + (f"\n\nExit codes: {codes}" if codes else "")


BATCH_CODES = (
    "0 ran (per-comment errors are in the table) · 2 fix the setup (no source or provider, key, "
    "model, request) · 3 wait (provider or dev.to unreachable, 429, quota, cooldown, breaker) · "
    "4 another run holds the lock · 5 state error · 130/143 stopped by Ctrl-C/SIGTERM"
)
READ_CODES = "0 ok · 2 bad argument or unknown id · 5 corrupt state file (moved to quarantine/)"
EVAL_CODES = (
    "0 ok · 2 bad option or unusable set, or a paid provider without --provider-calls and --eval-dir · "
    "3 (--set with a provider) stopped by the provider · 5 corrupt state file (moved to quarantine/)"
)
VIEW_CODES = (
    "0 ok · 2 bad option · 5 corrupt state file (moved to quarantine/)"  # commands that take no id
)
CLAIM_CODES = (
    "0 claimed (or nothing to claim) · 2 bad --limit, or WATCHER_PROVIDER is not agent · "
    "4 another run holds the lock · 5 state error"
)
SUBMIT_CODES = (
    "0 stored: a verdict, or an invalid one counted as the attempt · 2 bad argument, unknown id, or "
    "refused: not the open claim (duplicate, closed after its lease, another attempt) — nothing "
    "changed · 4 another run holds the lock · 5 state error"
)


@dataclass
class Frontend:
    """How results are shown: ``cli`` (human or --json) or ``bridge`` (always the envelope), and
    the hooks every command hands the pipeline (:func:`main`'s ``hooks``)."""

    entrypoint: str = "cli"
    data_dir: Path | None = None
    verbose: bool = False
    hooks: Hooks = field(default_factory=Hooks)

    @property
    def always_envelope(self) -> bool:
        return self.entrypoint == "bridge"

    def respond(
        self, command: str, fn: Callable[[Context], Any], *, as_json: bool, batch: bool = False
    ) -> None:
        """Answer one typed command: run ``fn`` through :func:`watcher.commands.core.execute` (with a
        progress display for a ``batch`` shown to a person), print the envelope, and exit with
        its code (``typer.Exit``)."""
        ctx = Context(
            entrypoint=self.entrypoint,
            data_dir=self.data_dir,
            notice=self._notice,
            hooks=self.hooks,
        )
        progress = None
        if batch and not self.always_envelope:
            from watcher.cli.render import BatchProgress  # rich: only for a batch shown to a person

            progress = BatchProgress(verbose=self.verbose)
            if command in ("scan", "demo"):
                progress.fetching(
                    "fetching new comments from dev.to…"
                    if command == "scan"
                    else "reading the sample comments…"
                )
            ctx.hooks = _with_progress(self.hooks, progress)
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
            render.human(envelope.command, envelope.result, envelope.error)
        if envelope.error and not render.says_its_own_errors(envelope.result):
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
            # A pipe or a mail gets the whole line.
            try:
                width = os.get_terminal_size(sys.stderr.fileno()).columns
            except OSError:
                width = 80
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


def _frontend(ctx: typer.Context) -> Frontend:
    frontend = ctx.obj
    assert isinstance(frontend, Frontend)
    return frontend


JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout and nothing else there.")
]


def _whole_number(value: str) -> int:
    # Typer's own message ("Input should be a valid integer…") does not say what was typed.
    try:
        return int(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a whole number") from None


LimitOpt = Annotated[
    int,
    typer.Option(
        "--limit",
        help="Most model calls this run (1–20).",
        show_default=True,
        parser=_whole_number,
        metavar="N",
    ),
]
ParallelOpt = Annotated[
    int | None,
    typer.Option(
        "--parallel",
        metavar="N",
        help="Model calls in flight at once (1–8); default WATCHER_PARALLEL, else 4 for the "
        "providers' own endpoints and 1 for another WATCHER_BASE_URL.",
        parser=_whole_number,
        show_default=False,
    ),
]
DryOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Plan and print what would be called; take no lock, write nothing, call nothing.",
    ),
]


BRIDGE_HELP = f"""The watcher commands for agents (OpenAI Codex, Claude Code): every answer is exactly one
JSON envelope on stdout, and the exit code is the CLI's.

\b
Envelope: {{"ok", "command", "exit_code", "result", "error": {{"kind", "message"}} | null}}
Nothing else is printed on stdout; notices and logs go to stderr; never prompts or colours.

\b
  watcher-bridge mcp [--data-dir DIR] [--verbose]
      serve the same commands as MCP tools over stdio (needs the 'mcp' extra)

grant is refused here: raising a comment's budget is the person's decision (`watcher grant`).

Exit codes: {exit_code_legend()}."""


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


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"devto-watcher {__version__}\n")
        raise typer.Exit(0)


def build_app(entrypoint: str = "cli") -> typer.Typer:
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
        data_dir: Annotated[
            Path | None,
            typer.Option(
                "--data-dir",
                help="Data directory [env WATCHER_DATA_DIR; "
                "default the user's data directory, "
                "~/.local/share/devto-watcher on Linux].",
            ),
        ] = None,
        verbose: Annotated[
            bool, typer.Option("--verbose", "-v", help="Say more on stderr.")
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
        ctx.obj = Frontend(entrypoint=entrypoint, data_dir=data_dir, verbose=verbose, hooks=hooks)

    @app.command(
        epilog=_epilog(
            "watcher demo",
            "watcher --data-dir /tmp/try demo",
            codes="0 ok · 5 the demo data dir cannot be written",
        )
    )
    def demo(ctx: typer.Context, as_json: JsonOpt = False) -> None:
        """Show what watcher does, on the bundled sample comments: the real pipeline with the offline
        classifier (no network, no key), in its own data dir (--data-dir, else ./data/demo), then
        what needs a reply. Never touches the data dir or provider your account uses."""
        _frontend(ctx).respond("demo", commands.demo, as_json=as_json, batch=True)

    @app.command(
        epilog=_epilog(
            "watcher scan",
            "watcher scan --limit 20 --json",
            "watcher scan --dry-run",
            "watcher scan --since 2026-11-01",
            "watcher scan --source export.json",
            codes=BATCH_CODES,
        )
    )
    def scan(
        ctx: typer.Context,
        limit: LimitOpt = commands.DEFAULT_LIMIT,
        parallel: ParallelOpt = None,
        dry_run: DryOpt = False,
        source: Annotated[
            str | None,
            typer.Option(
                "--source",
                help="'devto' (the default; needs "
                "DEVTO_USERNAME), a Forem-format export FILE, or 'sample' "
                "(the bundled demo comments, offline, in ./data/demo "
                "unless --data-dir is given).",
            ),
        ] = None,
        since: Annotated[
            str | None,
            typer.Option(
                "--since",
                metavar="DATE",
                help="Also queue baseline "
                "comments created on or after DATE (e.g. 2026-11-01): the "
                "backlog a first scan recorded without checking.",
            ),
        ] = None,
        full: Annotated[
            bool,
            typer.Option(
                "--full",
                help="Re-fetch every article's comments, not only those "
                "whose comment count or last-comment time moved.",
            ),
        ] = False,
        as_json: JsonOpt = False,
    ) -> None:
        """Fetch new comments and make the first model attempt for each (at most --limit calls).

        Needs WATCHER_PROVIDER and DEVTO_USERNAME (or --source FILE). A setup failure stops the
        batch at once and costs at most one attempt per outage."""
        _frontend(ctx).respond(
            "scan",
            lambda c: commands.scan(
                c,
                limit=limit,
                dry_run=dry_run,
                source=source,
                since=since,
                full=full,
                parallel=parallel,
            ),
            as_json=as_json,
            batch=True,
        )

    @app.command(
        epilog=_epilog(
            "watcher recheck",
            "watcher recheck 3bkf --json",
            "watcher recheck --dry-run",
            codes=BATCH_CODES,
        )
    )
    def recheck(
        ctx: typer.Context,
        ids: Annotated[
            list[str] | None,
            typer.Argument(
                metavar="ID",
                help="Only these comment ids (default: every failed or interrupted one).",
            ),
        ] = None,
        limit: LimitOpt = commands.DEFAULT_LIMIT,
        parallel: ParallelOpt = None,
        dry_run: DryOpt = False,
        as_json: JsonOpt = False,
    ) -> None:
        """Retry failed verdicts with the cached prompt; each comment gets 3 model attempts in all.

        Also closes attempts a killed run left open (as interrupted, no call for them this run)."""
        _frontend(ctx).respond(
            "recheck",
            lambda c: commands.recheck(
                c, limit=limit, dry_run=dry_run, ids=ids or (), parallel=parallel
            ),
            as_json=as_json,
            batch=True,
        )

    @app.command(
        epilog=_epilog(
            "watcher cron",
            "*/30 * * * * . $HOME/.config/devto-watcher.env && /path/to/devto-watcher/.venv/bin/watcher cron",
            codes=BATCH_CODES.replace(
                "0 ran (per-comment errors are in the table)", "0 every step ran"
            ),
        )
    )
    def cron(
        ctx: typer.Context,
        limit: Annotated[
            int,
            typer.Option(
                "--limit",
                help="Most model calls for scan, and again for recheck (1–20 each).",
                show_default=True,
                parser=_whole_number,
                metavar="N",
            ),
        ] = commands.DEFAULT_LIMIT,
        as_json: JsonOpt = False,
    ) -> None:
        """For cron: scan, recheck, then the new comments that need a reply — quiet otherwise.

        Stdout: each new comment needing a reply, once; a comment whose attempts are all spent,
        named once with the command that helps. Stderr: a problem as one line with its fix, when it
        starts or changes, and at most once a day while it lasts. Nothing at all when nothing is
        new and nothing is wrong. Each step runs even when the one before it stopped; the exit code
        is non-zero whenever one did."""
        from watcher.commands.cron import cron as cron_round

        _frontend(ctx).respond("cron", lambda c: cron_round(c, limit=limit), as_json=as_json)

    @app.command(
        epilog=_epilog("watcher claim --json", "watcher claim --limit 1", codes=CLAIM_CODES)
    )
    def claim(
        ctx: typer.Context,
        limit: Annotated[
            int,
            typer.Option(
                "--limit",
                help="Most comments to claim (1–20).",
                show_default=True,
                parser=_whole_number,
                metavar="N",
            ),
        ] = commands.DEFAULT_LIMIT,
        as_json: JsonOpt = False,
    ) -> None:
        """With WATCHER_PROVIDER=agent: reserve one attempt for each of the oldest comments that need a
        verdict, for the agent you work with to judge (a 15-minute lease), and hand out the prompts.

        Each claim is one of the comment's 3 attempts. --json gives each prompt and the verdict
        schema; `watcher submit` stores the answer. The MCP tools claim and submit do the same."""
        _frontend(ctx).respond("claim", lambda c: commands.claim(c, limit=limit), as_json=as_json)

    @app.command(
        epilog=_epilog(
            'watcher submit 3bkf 1 \'{"needs_reply": true, "category": "question", '
            '"priority": "normal", "summary": "Asks about X.", "reply_hint": ""}\'',
            "watcher submit 3bkf 2 - < verdict.json",
            codes=SUBMIT_CODES,
        )
    )
    def submit(
        ctx: typer.Context,
        comment_id: Annotated[str, typer.Argument(metavar="ID")],
        n: Annotated[
            int,
            typer.Argument(
                metavar="N", parser=_whole_number, help="The attempt number claim handed out."
            ),
        ],
        verdict: Annotated[
            str,
            typer.Argument(
                metavar="VERDICT", help="The verdict as a JSON object, or - to read it from stdin."
            ),
        ],
        as_json: JsonOpt = False,
    ) -> None:
        """Store the agent's verdict for attempt N of a claimed comment.

        Only the open claim is accepted (a duplicate or a late submit changes nothing). A verdict that
        fails the schema is recorded as the attempt's error and counts, as a model's would."""
        text = sys.stdin.read() if verdict == "-" else verdict
        _frontend(ctx).respond(
            "submit", lambda c: commands.submit(c, comment_id, n, text), as_json=as_json
        )

    @app.command(
        epilog=_epilog(
            "watcher status", "watcher --data-dir ~/devto status --json", codes=VIEW_CODES
        )
    )
    def status(ctx: typer.Context, as_json: JsonOpt = False) -> None:
        """Counts by state, the provider (cooldown, breaker), signal counts and paths. Free: no key needed."""
        _frontend(ctx).respond("status", commands.status, as_json=as_json)

    @app.command(
        "inbox",
        epilog=_epilog(
            "watcher inbox",
            "watcher inbox --all",
            "watcher inbox --new   (each new comment once; `watcher cron` runs it for cron)",
            codes=VIEW_CODES,
        ),
    )
    def inbox_cmd(
        ctx: typer.Context,
        show_all: Annotated[
            bool, typer.Option("--all", help="Every known comment, not only those needing a reply.")
        ] = False,
        new: Annotated[
            bool,
            typer.Option(
                "--new",
                help="Only those no earlier --new listed, and remember "
                "them; prints nothing when there are none.",
            ),
        ] = False,
        as_json: JsonOpt = False,
    ) -> None:
        """Comments that need a reply (the verdict says so and you have not marked them)."""
        _frontend(ctx).respond(
            "inbox", lambda c: commands.inbox_view(c, show_all=show_all, new=new), as_json=as_json
        )

    @app.command(epilog=_epilog("watcher show 3bkf", "watcher show 3bkf --json", codes=READ_CODES))
    def show(
        ctx: typer.Context,
        comment_id: Annotated[str, typer.Argument(metavar="ID")],
        as_json: JsonOpt = False,
    ) -> None:
        """One comment: its text, verdict and every attempt."""
        _frontend(ctx).respond("show", lambda c: commands.show(c, comment_id), as_json=as_json)

    @app.command(
        epilog=_epilog(
            "watcher mark 3bkf replied",
            "watcher mark 3bkf 3bkg 3bkh ignored",
            "watcher mark 3bkf open   (back in the inbox, until you reply on dev.to again)",
            codes=READ_CODES,
        )
    )
    def mark(
        ctx: typer.Context,
        args: Annotated[list[str], typer.Argument(metavar="ID... replied|ignored|open")],
        as_json: JsonOpt = False,
    ) -> None:
        """Mark comments replied, ignored or open again. Every id is checked first: one unknown id
        marks nothing. Works while a batch runs."""
        *ids, triage = args

        def marked(c: Context) -> MarkResult:
            if not ids:
                raise UsageError(
                    "mark takes one or more comment ids and then replied, ignored or open "
                    "(e.g. `watcher mark 3bkf replied`)"
                )
            return commands.mark(c, ids, triage)

        _frontend(ctx).respond("mark", marked, as_json=as_json)

    @app.command(epilog=_epilog("watcher articles", "watcher articles --json", codes=READ_CODES))
    def articles(ctx: typer.Context, as_json: JsonOpt = False) -> None:
        """Per article: comments, how many need a reply, the oldest one waiting and the last activity,
        what waits longest first. Free: no key needed."""
        _frontend(ctx).respond("articles", commands.articles, as_json=as_json)

    @app.command(
        epilog=_epilog(
            "watcher check",
            "WATCHER_MODEL=gpt-6-luna watcher check --json",
            codes="0 all pass · 2 fix the setup · 3 the provider or dev.to cannot be reached · "
            "5 the data dir cannot be written",
        )
    )
    def check(ctx: typer.Context, as_json: JsonOpt = False) -> None:
        """Check the setup for free: config, API key, the provider and model (its models endpoint,
        no tokens), the dev.to user, the data dir. Exit 0 only if all pass."""
        _frontend(ctx).respond("check", commands.check, as_json=as_json)

    @app.command(
        epilog=_epilog(
            "watcher grant 3bkf",
            "watcher grant 3bkf --attempts 2 && watcher recheck 3bkf",
            "watcher grant 3bkf --yes   (no terminal: cron, a script)",
            codes="0 granted · 2 unknown id, not exhausted or failed, baseline or answered, "
            "past 3 + 6 in all, not confirmed, or asked through the bridge · "
            "4 a batch holds the lock · 5 state error",
        )
    )
    def grant(
        ctx: typer.Context,
        comment_id: Annotated[str, typer.Argument(metavar="ID")],
        attempts: Annotated[
            int,
            typer.Option(
                "--attempts",
                help="How many more attempts (1–3; 6 in all per comment).",
                parser=_whole_number,
                metavar="N",
            ),
        ] = 1,
        yes: Annotated[
            bool,
            typer.Option(
                "--yes", "-y", help="Confirm without being asked (required without a terminal)."
            ),
        ] = False,
        as_json: JsonOpt = False,
    ) -> None:
        """Give an exhausted or failed comment more model attempts (the cap becomes 3 + grants, at most 3 + 6).

        Your decision as the one who pays: you are asked to confirm (--yes without a terminal), and
        the bridge and the MCP server refuse it."""
        confirm = None if yes else _ask_the_person
        _frontend(ctx).respond(
            "grant",
            lambda c: commands.grant(c, comment_id, attempts=attempts, confirm=confirm),
            as_json=as_json,
        )

    @app.command(
        "eval",
        epilog=_epilog(
            "watcher eval",
            "watcher eval --since 2026-11-01 --json",
            "watcher eval --set bundled",
            "watcher eval --set data/eval   (the same set, from a clone)",
            "watcher eval --set bundled --provider openai --provider-calls 200 --eval-dir ~/watcher-eval",
            codes=EVAL_CODES,
        ),
    )
    def eval_cmd(
        ctx: typer.Context,
        since: Annotated[
            str | None,
            typer.Option(
                "--since",
                metavar="DATE",
                help="Only comments created on or after DATE (e.g. 2026-11-01).",
            ),
        ] = None,
        labelled_set: Annotated[
            str | None,
            typer.Option(
                "--set",
                metavar="DIR|bundled",
                help="Judge a "
                "labelled set instead (export.json + labels.json; "
                "'bundled': the one shipped with watcher) in a "
                "data dir of its own, offline unless --provider "
                "says otherwise.",
            ),
        ] = None,
        provider: Annotated[
            str | None,
            typer.Option(
                "--provider",
                metavar="NAME",
                help="With --set: a "
                "provider that makes "
                "real calls (openai, anthropic; model, key and URL "
                "from the environment). Needs --provider-calls and "
                "--eval-dir.",
            ),
        ] = None,
        provider_calls: Annotated[
            int | None,
            typer.Option(
                "--provider-calls",
                metavar="N",
                parser=_whole_number,
                help="With --set: the most model calls the evaluation may make.",
            ),
        ] = None,
        eval_dir: Annotated[
            str | None,
            typer.Option(
                "--eval-dir",
                metavar="DIR",
                help="With --set: the "
                "evaluation's own data dir, kept (a second run "
                "resumes); default a temporary one.",
            ),
        ] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """How good are the verdicts? Compares them with what you did: replied on dev.to or `mark replied`
        (needed a reply), `mark ignored` (did not). Per provider, model and prompt version: agreement,
        precision and recall of needs_reply, and the comments where they differ.

        Free: no model call, nothing written (--set judges the labelled set in a data dir of its own).
        Comments you have not replied to or marked are counted, not guessed."""
        _frontend(ctx).respond(
            "eval",
            lambda c: commands.evaluate(
                c,
                since=since,
                labelled_set=labelled_set,
                provider=provider,
                provider_calls=provider_calls,
                eval_dir=eval_dir,
            ),
            as_json=as_json,
        )

    @app.command(
        epilog=_epilog(
            "watcher signals",
            "watcher signals --reset",
            codes="0 ok · 5 the observation log was replaced or truncated (recount with --reset)",
        )
    )
    def signals(
        ctx: typer.Context,
        reset: Annotated[
            bool,
            typer.Option("--reset", help="Recount the whole observation log from zero on purpose."),
        ] = False,
        as_json: JsonOpt = False,
    ) -> None:
        """Count the observation signals and print the totals per key.

        Every run appends one line per event to observations.jsonl in the data dir (a verdict, an
        error of each kind, a stopped batch, a busy lock, rejected input); this counts each line
        exactly once, across crashes. A record of what the runs did, for diagnosis: nothing to act on
        by itself. `watcher status` shows the same counts."""
        _frontend(ctx).respond(
            "signals", lambda c: commands.signals_cmd(c, reset=reset), as_json=as_json
        )

    return app


def main(
    argv: Sequence[str] | None = None, *, entrypoint: str = "cli", hooks: Hooks | None = None
) -> None:
    """Console entry point of ``watcher`` (and, with ``entrypoint="bridge"``, of the bridge): run
    ``argv`` (default ``sys.argv[1:]``) as typed, print the answer, raise ``SystemExit`` with the
    exit code.

    ``hooks`` are what this front end hands the pipeline for every command (:class:`Hooks`: the
    store, provider and source factories, the clock, progress callbacks — called before the
    front end's own progress display). The console scripts pass none; a program that runs the
    CLI inside its own process, such as the test suite (tests/README.md), passes its own."""
    command = _command(entrypoint)
    args = hoist_global_options(list(sys.argv[1:] if argv is None else argv))
    prog = "watcher-bridge" if entrypoint == "bridge" else "watcher"
    if entrypoint != "bridge" and not wants_json(args):
        command(
            args=args, prog_name=prog, obj=hooks
        )  # click prints its own usage errors for a person
        return
    # --json and the bridge: every failure is exactly one envelope on stdout (SPEC §13.5, §15.5),
    # also the arguments typer and click refuse before any command runs ("-1" read as an
    # option, "1.5" for a whole number, a missing argument): an agent parsing stdout must never
    # get click's usage text instead.
    try:
        code = command(args=args, prog_name=prog, standalone_mode=False, obj=hooks)
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except _CLICK_ERROR as exc:
        refuse(entrypoint, command_named(args), UsageError(exc.format_message()))  # type: ignore[attr-defined]
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
    frontend.render(
        envelope, as_json=True
    )  # the CLI also says the error on stderr; the bridge does not
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
    """The command an argument list names ("" when none), for the envelope of a refused command line."""
    at = command_at(args)
    return "" if at is None else args[at]


# What `watcher --help` lists beside each command: click cuts a longer line with "…".
SHORT_HELP = {
    "demo": "See what it does, on bundled sample comments (offline).",
    "scan": "Fetch new comments; the first model attempt for each.",
    "recheck": "Retry failed verdicts (3 attempts per comment in all).",
    "cron": "For cron: scan, recheck, list what is new; else quiet.",
    "claim": "Provider agent: reserve comments for the agent to judge.",
    "submit": "Provider agent: store the agent's verdict.",
    "status": "Counts, provider, breaker, signals and paths.",
    "inbox": "The comments that need a reply.",
    "show": "One comment: its text, thread, verdict and every attempt.",
    "mark": "Mark comments replied, ignored or open.",
    "articles": "Per article: comments, how many wait, the oldest, activity.",
    "check": "Test the setup for free (no attempt, no tokens).",
    "grant": "Give a spent comment more attempts (your decision).",
    "signals": "Count what the runs recorded (observation signals).",
    "eval": "How good the verdicts are, by your replies and marks.",
}


class _PlainArgument(TyperArgument):
    """An argument shown as click shows one: ``ID`` / ``[ID]...`` in the usage line, not typer's
    ``{ID}``, and no ``<list[str]>`` type after its name in the list of arguments."""

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 and "..." not in name else "")

    def display_type_rich(self, ctx: Any) -> str | None:  # typer's vendored click.Context
        return None


@functools.cache
def _command(entrypoint: str) -> Callable[..., Any]:
    """The click command typer makes of :func:`build_app` (what ``app()`` runs), made once per
    entry point: typer introspects every command's signature for it (~15 ms of CPU), and
    :func:`main` may run many times in one process."""
    group = typer.main.get_command(build_app(entrypoint))
    for name, sub in getattr(group, "commands", {}).items():
        sub.short_help = SHORT_HELP.get(name, sub.short_help)
        for param in sub.params:
            if type(param) is TyperArgument:
                param.__class__ = _PlainArgument
    return group


# click's base error class, wherever this typer version keeps click (vendored in newer typer).
_CLICK_ERROR: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
)
