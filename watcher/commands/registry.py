"""Every command, once: the table the CLI, the envelope's schema, the renderer and the MCP server read.

A command is its core function plus one entry here (STYLE rule 19). ``watcher/cli/app.py`` makes
each entry a typer command (its options from ``params``, its help, examples and exit codes);
``bridge/cli.py`` offers it as ``watcher-bridge <name>`` when ``bridge`` is set; the envelope's
schema types ``result`` as ``result`` says (:func:`envelope_schema`); the human renderer calls
``view``; ``bridge/mcp_server.py`` lists a tool for it when ``mcp`` is set, with that description,
those annotations and arguments.

To add a command ``watcher open ID``:

1. Write ``watcher/commands/open.py``: the core function ``open_comment(ctx, comment_id)`` that
   returns a result model defined beside it (a pydantic model with ``extra="forbid"``, like those
   in :mod:`watcher.commands.results`), and its human view ``view(result, screen)``
   (:mod:`watcher.commands.screen`: print with ``screen.out``; import rich inside the view).
   Raise a :mod:`watcher.errors` error for a failure: :func:`watcher.commands.core.execute`
   makes it the exit code and the envelope.
2. Add one :class:`~watcher.commands.spec.Command` to :data:`COMMANDS` below: its name, the
   one-line ``summary`` for ``watcher --help``, ``help``, ``examples``, the exit-code line
   ``codes``, ``result``, ``run`` (the parsed arguments, by :class:`~watcher.commands.spec.Param`
   name, to the core call), ``view`` as ``"watcher.commands.open:view"``, its ``params``;
   ``bridge=False`` if an agent must not run it, and an :class:`~watcher.commands.spec.Mcp` if the
   MCP server offers it as a tool. Where it stands in :data:`COMMANDS` is where ``--help`` lists it.

Every command takes ``--json`` and the global ``--data-dir``/``--verbose``; they are not listed.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, cast

from pydantic import BaseModel, Field

from watcher.commands import core
from watcher.commands import tool_text as words
from watcher.commands.core import Context
from watcher.commands.cron import cron
from watcher.commands.envelope import Envelope
from watcher.commands.results import (
    ArticlesResult,
    BatchResult,
    CheckResult,
    ClaimResult,
    CommentRecord,
    CronResult,
    DemoResult,
    EvalResult,
    GrantResult,
    InboxResult,
    MarkResult,
    SignalsResult,
    StatusResult,
    SubmitResult,
)
from watcher.commands.spec import (
    AGENT,
    BATCH_CODES,
    COMMENT_ID,
    DRY_RUN,
    LIMIT,
    LOCAL,
    MARKS,
    MCP_DRY_RUN,
    MCP_ID,
    MCP_LIMIT,
    PARALLEL,
    PROBES,
    READ_CODES,
    SPENDS,
    VIEW_CODES,
    Args,
    Command,
    IdItem,
    Mcp,
    McpArg,
    Param,
    whole_number,
)
from watcher.errors import UsageError
from watcher.pipeline import DEFAULT_LIMIT, MAX_LIMIT

VIEWS = "watcher.cli.views"


def _scan_tool(c: Context, a: Args) -> Any:
    if a["source"] == core.SAMPLE:
        # SPEC §15.4: the sample's comments go to the demo's own data dir, which the server's
        # inbox and show never read; the person runs `watcher demo` instead.
        raise UsageError(words.SAMPLE_REFUSED)
    return _scan(c, a)


def _scan(c: Context, a: Args) -> Any:
    return core.scan(
        c,
        limit=a["limit"],
        dry_run=a["dry_run"],
        source=a["source"],
        since=a.get("since"),
        full=a.get("full", False),
        parallel=a.get("parallel"),
    )


def _mark(c: Context, a: Args) -> MarkResult:
    *ids, triage = a["args"]
    if not ids:
        raise UsageError(
            "mark takes one or more comment ids and then replied, ignored or open "
            "(e.g. `watcher mark 3bkf replied`)"
        )
    return core.mark(c, ids, triage)


def _submit(c: Context, a: Args) -> Any:
    verdict = sys.stdin.read() if a["verdict"] == "-" else a["verdict"]
    return core.submit(c, a["id"], a["n"], verdict)


COMMANDS: tuple[Command, ...] = (
    Command(
        name="demo",
        summary="See what it does, on bundled sample comments (offline).",
        help="Show what watcher does, on the bundled sample comments: the real pipeline with the "
        "offline\nclassifier (no network, no key), in its own data dir (--data-dir, else "
        "./data/demo), then\nwhat needs a reply. Never touches the data dir or provider your "
        "account uses.",
        examples=("watcher demo", "watcher --data-dir /tmp/try demo"),
        codes="0 ok · 5 the demo data dir cannot be written",
        result=DemoResult,
        run=lambda c, a: core.demo(c),
        view=f"{VIEWS}.batch:demo",
        batch=True,
        fetching="reading the sample comments…",
    ),
    Command(
        name="scan",
        summary="Fetch new comments; the first model attempt for each.",
        help="Fetch new comments and make the first model attempt for each (at most --limit "
        "calls).\n\nNeeds WATCHER_PROVIDER and DEVTO_USERNAME (or --source FILE). A setup failure "
        "stops the\nbatch at once and costs at most one attempt per outage.",
        examples=(
            "watcher scan",
            "watcher scan --limit 20 --json",
            "watcher scan --dry-run",
            "watcher scan --since 2026-11-01",
            "watcher scan --source export.json",
        ),
        codes=BATCH_CODES,
        result=BatchResult,
        run=_scan,
        view=f"{VIEWS}.batch:batch",
        params=(
            LIMIT,
            PARALLEL,
            DRY_RUN,
            Param(
                name="source",
                type=str | None,
                default=None,
                flags=("--source",),
                help="'devto' (the default; needs DEVTO_USERNAME), a Forem-format export FILE, "
                "or 'sample' (the bundled demo comments, offline, in ./data/demo unless "
                "--data-dir is given).",
            ),
            Param(
                name="since",
                type=str | None,
                default=None,
                flags=("--since",),
                metavar="DATE",
                help="Also queue baseline comments created on or after DATE (e.g. 2026-11-01): "
                "the backlog a first scan recorded without checking.",
            ),
            Param(
                name="full",
                type=bool,
                default=False,
                flags=("--full",),
                help="Re-fetch every article's comments, not only those whose comment count or "
                "last-comment time moved.",
            ),
        ),
        batch=True,
        fetching="fetching new comments from dev.to…",
        mcp=Mcp(
            description=words.SCAN,
            hints=SPENDS,
            progress=True,
            run=_scan_tool,
            args=(
                MCP_LIMIT,
                MCP_DRY_RUN,
                McpArg(
                    "source",
                    Annotated[
                        str | None,
                        Field(
                            description="'devto' (needs DEVTO_USERNAME or DEVTO_API_KEY in the "
                            "server's environment), or the path of a Forem-format export file on "
                            "this machine. Omitted: dev.to; without a dev.to account that is "
                            "exit_code 2. Not 'sample': the bundled demo is `watcher demo`, in a "
                            "terminal."
                        ),
                    ],
                    None,
                ),
            ),
        ),
    ),
    Command(
        name="recheck",
        summary="Retry failed verdicts (3 attempts per comment in all).",
        help="Retry failed verdicts with the cached prompt; each comment gets 3 model attempts in "
        "all.\n\nAlso closes attempts a killed run left open (as interrupted, no call for them "
        "this run).",
        examples=("watcher recheck", "watcher recheck 3bkf --json", "watcher recheck --dry-run"),
        codes=BATCH_CODES,
        result=BatchResult,
        run=lambda c, a: core.recheck(
            c,
            limit=a["limit"],
            dry_run=a["dry_run"],
            ids=a["ids"] or (),
            parallel=a.get("parallel"),
        ),
        view=f"{VIEWS}.batch:batch",
        params=(
            Param(
                name="ids",
                type=list[str] | None,
                default=None,
                metavar="ID",
                help="Only these comment ids (default: every failed or interrupted one).",
            ),
            LIMIT,
            PARALLEL,
            DRY_RUN,
        ),
        batch=True,
        mcp=Mcp(
            description=words.RECHECK,
            hints=SPENDS,
            progress=True,
            args=(
                MCP_LIMIT,
                MCP_DRY_RUN,
                McpArg(
                    "ids",
                    Annotated[
                        list[IdItem] | None,
                        Field(
                            description="Only these comment ids. Omitted: every failed or "
                            "interrupted comment, oldest first."
                        ),
                    ],
                    None,
                ),
            ),
        ),
    ),
    Command(
        name="cron",
        summary="For cron: scan, recheck, list what is new; else quiet.",
        help="For cron: scan, recheck, then the new comments that need a reply — quiet "
        "otherwise.\n\nStdout: each new comment needing a reply, once; a comment whose attempts "
        "are all spent,\nnamed once with the command that helps. Stderr: a problem as one line "
        "with its fix, when it\nstarts or changes, and at most once a day while it lasts. "
        "Nothing at all when nothing is\nnew and nothing is wrong. Each step runs even when the "
        "one before it stopped; the exit code\nis non-zero whenever one did.",
        examples=(
            "watcher cron",
            "*/30 * * * * . $HOME/.config/devto-watcher.env && "
            "/path/to/devto-watcher/.venv/bin/watcher cron",
        ),
        codes=BATCH_CODES.replace(
            "0 ran (per-comment errors are in the table)", "0 every step ran"
        ),
        result=CronResult,
        run=lambda c, a: cron(c, limit=a["limit"]),
        view=f"{VIEWS}.reading:cron",
        own_errors=True,
        params=(
            Param(
                name="limit",
                type=int,
                default=DEFAULT_LIMIT,
                flags=("--limit",),
                help="Most model calls for scan, and again for recheck (1–20 each).",
                show_default=True,
                parser=whole_number,
                metavar="N",
            ),
        ),
    ),
    Command(
        name="claim",
        summary="Provider agent: reserve comments for the agent to judge.",
        help="With WATCHER_PROVIDER=agent: reserve one attempt for each of the oldest comments "
        "that need a\nverdict, for the agent you work with to judge (a 15-minute lease), and hand "
        "out the prompts.\n\nEach claim is one of the comment's 3 attempts. --json gives each "
        "prompt and the verdict\nschema; `watcher submit` stores the answer. The MCP tools claim "
        "and submit do the same.",
        examples=("watcher claim --json", "watcher claim --limit 1"),
        codes="0 claimed (or nothing to claim) · 2 bad --limit, or WATCHER_PROVIDER is not agent "
        "· 4 another run holds the lock · 5 state error",
        result=ClaimResult,
        run=lambda c, a: core.claim(c, limit=a["limit"]),
        view=f"{VIEWS}.batch:claim",
        params=(
            Param(
                name="limit",
                type=int,
                default=DEFAULT_LIMIT,
                flags=("--limit",),
                help="Most comments to claim (1–20).",
                show_default=True,
                parser=whole_number,
                metavar="N",
            ),
        ),
        mcp=Mcp(
            description=words.CLAIM,
            hints=AGENT,
            args=(
                McpArg(
                    "limit",
                    Annotated[
                        int,
                        Field(
                            description=f"Most comments to claim (1–{MAX_LIMIT}). Each claim "
                            "spends one of that comment's 3 attempts.",
                            json_schema_extra={"minimum": 1, "maximum": MAX_LIMIT},
                        ),
                    ],
                    DEFAULT_LIMIT,
                ),
            ),
        ),
    ),
    Command(
        name="submit",
        summary="Provider agent: store the agent's verdict.",
        help="Store the agent's verdict for attempt N of a claimed comment.\n\nOnly the open "
        "claim is accepted (a duplicate or a late submit changes nothing). A verdict that\nfails "
        "the schema is recorded as the attempt's error and counts, as a model's would.",
        examples=(
            'watcher submit 3bkf 1 \'{"needs_reply": true, "category": "question", '
            '"priority": "normal", "summary": "Asks about X.", "reply_hint": ""}\'',
            "watcher submit 3bkf 2 - < verdict.json",
        ),
        codes="0 stored: a verdict, or an invalid one counted as the attempt · 2 bad argument, "
        "unknown id, or refused: not the open claim (duplicate, closed after its lease, another "
        "attempt) — nothing changed · 4 another run holds the lock · 5 state error",
        result=SubmitResult,
        run=_submit,
        view=f"{VIEWS}.batch:submit",
        params=(
            COMMENT_ID,
            Param(
                name="n",
                type=int,
                metavar="N",
                parser=whole_number,
                help="The attempt number claim handed out.",
            ),
            Param(
                name="verdict",
                type=str,
                metavar="VERDICT",
                help="The verdict as a JSON object, or - to read it from stdin.",
            ),
        ),
        mcp=Mcp(
            description=words.SUBMIT,
            hints=AGENT,
            # An object or its JSON text; what it must hold is the core's check (an invalid
            # verdict counts), so the schema only says which JSON types reach it.
            run=lambda c, a: core.submit(c, a["id"], a["n"], a["verdict"]),
            args=(
                MCP_ID,
                McpArg(
                    "n",
                    Annotated[
                        int,
                        Field(
                            description="The attempt number (n) claim returned with this comment.",
                            json_schema_extra={"minimum": 1},
                        ),
                    ],
                ),
                McpArg(
                    "verdict",
                    Annotated[
                        dict[str, Any] | str,
                        Field(
                            description="Your verdict: a JSON object fitting the schema claim "
                            "returned (needs_reply, category, priority, summary, reply_hint), or "
                            "the JSON text of one."
                        ),
                    ],
                ),
            ),
        ),
    ),
    Command(
        name="status",
        summary="Counts, provider, breaker, signals and paths.",
        help="Counts by state, the provider (cooldown, breaker), signal counts and paths. Free: "
        "no key needed.",
        examples=("watcher status", "watcher --data-dir ~/devto status --json"),
        codes=VIEW_CODES,
        result=StatusResult,
        run=lambda c, a: core.status(c),
        view=f"{VIEWS}.reading:status",
        mcp=Mcp(description=words.STATUS, hints=LOCAL),
    ),
    Command(
        name="inbox",
        summary="The comments that need a reply.",
        help="Comments that need a reply (the verdict says so and you have not marked them).",
        examples=(
            "watcher inbox",
            "watcher inbox --all",
            "watcher inbox --new   (each new comment once; `watcher cron` runs it for cron)",
        ),
        codes=VIEW_CODES,
        result=InboxResult,
        run=lambda c, a: core.inbox_view(c, show_all=a["all"], new=a.get("new", False)),
        view=f"{VIEWS}.reading:inbox",
        params=(
            Param(
                name="all",
                type=bool,
                default=False,
                flags=("--all",),
                help="Every known comment, not only those needing a reply.",
            ),
            Param(
                name="new",
                type=bool,
                default=False,
                flags=("--new",),
                help="Only those no earlier --new listed, and remember them; prints nothing when "
                "there are none.",
            ),
        ),
        mcp=Mcp(
            description=words.INBOX,
            hints=LOCAL,
            args=(
                McpArg(
                    "all",
                    Annotated[
                        bool,
                        Field(
                            description="List every known comment with its state, not only "
                            "those needing a reply."
                        ),
                    ],
                    False,
                ),
            ),
        ),
    ),
    Command(
        name="show",
        summary="One comment: its text, thread, verdict and every attempt.",
        help="One comment: its text, verdict and every attempt.",
        examples=("watcher show 3bkf", "watcher show 3bkf --json"),
        codes=READ_CODES,
        result=CommentRecord,
        run=lambda c, a: core.show(c, a["id"], prompt=a.get("prompt", True)),
        view=f"{VIEWS}.reading:show",
        params=(COMMENT_ID,),
        mcp=Mcp(
            description=words.SHOW,
            hints=LOCAL,
            args=(
                MCP_ID,
                McpArg(
                    "prompt",
                    Annotated[
                        bool,
                        Field(
                            description="Include the cached prompt sent to the model (about 2 KB)."
                        ),
                    ],
                    False,
                ),
            ),
        ),
    ),
    Command(
        name="mark",
        summary="Mark comments replied, ignored or open.",
        help="Mark comments replied, ignored or open again. Every id is checked first: one "
        "unknown id\nmarks nothing. Works while a batch runs.",
        examples=(
            "watcher mark 3bkf replied",
            "watcher mark 3bkf 3bkg 3bkh ignored",
            "watcher mark 3bkf open   (back in the inbox, until you reply on dev.to again)",
        ),
        codes=READ_CODES,
        result=MarkResult,
        run=_mark,
        view=f"{VIEWS}.reading:mark",
        params=(Param(name="args", type=list[str], metavar="ID... replied|ignored|open"),),
        mcp=Mcp(
            description=words.MARK,
            hints=MARKS,
            run=lambda c, a: core.mark(c, [a["id"], *(a["more_ids"] or ())], a["triage"]),
            args=(
                MCP_ID,
                McpArg(
                    "triage",
                    Annotated[
                        str,
                        Field(
                            description="replied: the author posted a reply · ignored: it needs "
                            "no answer · open: back on the to-do list.",
                            json_schema_extra={"enum": list(core.TRIAGE_CHOICES)},
                        ),
                    ],
                ),
                McpArg(
                    "more_ids",
                    Annotated[
                        list[IdItem] | None,
                        Field(
                            description="More comment ids to mark the same way. Every id is "
                            "checked first: one unknown id marks nothing."
                        ),
                    ],
                    None,
                ),
            ),
        ),
    ),
    Command(
        name="articles",
        summary="Per article: comments, how many wait, the oldest, activity.",
        help="Per article: comments, how many need a reply, the oldest one waiting and the last "
        "activity,\nwhat waits longest first. Free: no key needed.",
        examples=("watcher articles", "watcher articles --json"),
        codes=READ_CODES,
        result=ArticlesResult,
        run=lambda c, a: core.articles(c),
        view=f"{VIEWS}.reading:articles",
        mcp=Mcp(description=words.ARTICLES, hints=LOCAL),
    ),
    Command(
        name="check",
        summary="Test the setup for free (no attempt, no tokens).",
        help="Check the setup for free: config, API key, the provider and model (its models "
        "endpoint,\nno tokens), the dev.to user, the data dir. Exit 0 only if all pass.",
        examples=("watcher check", "WATCHER_MODEL=gpt-6-luna watcher check --json"),
        codes="0 all pass · 2 fix the setup · 3 the provider or dev.to cannot be reached · "
        "5 the data dir cannot be written",
        result=CheckResult,
        run=lambda c, a: core.check(c),
        view=f"{VIEWS}.person:check",
        mcp=Mcp(description=words.CHECK, hints=PROBES),
    ),
    Command(
        name="grant",
        summary="Give a spent comment more attempts (your decision).",
        help="Give an exhausted or failed comment more model attempts (the cap becomes 3 + "
        "grants, at most 3 + 6).\n\nYour decision as the one who pays: you are asked to confirm "
        "(--yes without a terminal), and\nthe bridge and the MCP server refuse it.",
        examples=(
            "watcher grant 3bkf",
            "watcher grant 3bkf --attempts 2 && watcher recheck 3bkf",
            "watcher grant 3bkf --yes   (no terminal: cron, a script)",
        ),
        codes="0 granted · 2 unknown id, not exhausted or failed, baseline or answered, past 3 "
        "+ 6 in all, not confirmed, or asked through the bridge · 4 a batch holds the lock · "
        "5 state error",
        result=GrantResult,
        run=lambda c, a: core.grant(
            c, a["id"], attempts=a["attempts"], confirm=None if a["yes"] else c.ask
        ),
        view=f"{VIEWS}.person:grant",
        params=(
            COMMENT_ID,
            Param(
                name="attempts",
                type=int,
                default=1,
                flags=("--attempts",),
                help="How many more attempts (1–3; 6 in all per comment).",
                parser=whole_number,
                metavar="N",
            ),
            Param(
                name="yes",
                type=bool,
                default=False,
                flags=("--yes", "-y"),
                help="Confirm without being asked (required without a terminal).",
            ),
        ),
        # Not a tool; a call by this name gets the core's refusal, which says why (SPEC §13.2).
        mcp=Mcp(
            description="",
            hints=MARKS,
            listed=False,
            run=lambda c, a: core.grant(c, str(a.get("id", ""))),
        ),
    ),
    Command(
        name="eval",
        summary="How good the verdicts are, by your replies and marks.",
        help="How good are the verdicts? Compares them with what you did: replied on dev.to or "
        "`mark replied`\n(needed a reply), `mark ignored` (did not). Per provider, model and "
        "prompt version: agreement,\nprecision and recall of needs_reply, and the comments where "
        "they differ.\n\nFree: no model call, nothing written (--set judges the labelled set in "
        "a data dir of its own).\nComments you have not replied to or marked are counted, not "
        "guessed.",
        examples=(
            "watcher eval",
            "watcher eval --since 2026-11-01 --json",
            "watcher eval --set bundled",
            "watcher eval --set data/eval   (the same set, from a clone)",
            "watcher eval --set bundled --provider openai --provider-calls 200 "
            "--eval-dir ~/watcher-eval",
        ),
        codes="0 ok · 2 bad option or unusable set, or a paid provider without --provider-calls "
        "and --eval-dir · 3 (--set with a provider) stopped by the provider · 5 corrupt state "
        "file (moved to quarantine/)",
        result=EvalResult,
        run=lambda c, a: core.evaluate(
            c,
            since=a["since"],
            labelled_set=a.get("labelled_set"),
            provider=a.get("provider"),
            provider_calls=a.get("provider_calls"),
            eval_dir=a.get("eval_dir"),
        ),
        view=f"{VIEWS}.person:evaluation",
        params=(
            Param(
                name="since",
                type=str | None,
                default=None,
                flags=("--since",),
                metavar="DATE",
                help="Only comments created on or after DATE (e.g. 2026-11-01).",
            ),
            Param(
                name="labelled_set",
                type=str | None,
                default=None,
                flags=("--set",),
                metavar="DIR|bundled",
                help="Judge a labelled set instead (export.json + labels.json; 'bundled': the "
                "one shipped with watcher) in a data dir of its own, offline unless --provider "
                "says otherwise.",
            ),
            Param(
                name="provider",
                type=str | None,
                default=None,
                flags=("--provider",),
                metavar="NAME",
                help="With --set: a provider that makes real calls (openai, anthropic; model, "
                "key and URL from the environment). Needs --provider-calls and --eval-dir.",
            ),
            Param(
                name="provider_calls",
                type=int | None,
                default=None,
                flags=("--provider-calls",),
                metavar="N",
                parser=whole_number,
                help="With --set: the most model calls the evaluation may make.",
            ),
            Param(
                name="eval_dir",
                type=str | None,
                default=None,
                flags=("--eval-dir",),
                metavar="DIR",
                help="With --set: the evaluation's own data dir, kept (a second run resumes); "
                "default a temporary one.",
            ),
        ),
        mcp=Mcp(
            description=words.EVAL,
            hints=LOCAL,
            args=(
                McpArg(
                    "since",
                    Annotated[
                        str | None,
                        Field(
                            description="Only comments created on or after this date "
                            "(2026-11-01) or ISO time. Omitted: every comment."
                        ),
                    ],
                    None,
                ),
            ),
        ),
    ),
    Command(
        name="signals",
        summary="Count what the runs recorded (observation signals).",
        help="Count the observation signals and print the totals per key.\n\nEvery run appends "
        "one line per event to observations.jsonl in the data dir (a verdict, an\nerror of each "
        "kind, a stopped batch, a busy lock, rejected input); this counts each line\nexactly "
        "once, across crashes. A record of what the runs did, for diagnosis: nothing to act on\n"
        "by itself. `watcher status` shows the same counts.",
        examples=("watcher signals", "watcher signals --reset"),
        codes="0 ok · 5 the observation log was replaced or truncated (recount with --reset)",
        result=SignalsResult,
        run=lambda c, a: core.signals_cmd(c, reset=a["reset"]),
        view=f"{VIEWS}.person:signals",
        params=(
            Param(
                name="reset",
                type=bool,
                default=False,
                flags=("--reset",),
                help="Recount the whole observation log from zero on purpose.",
            ),
        ),
        mcp=Mcp(
            description=words.SIGNALS,
            hints=MARKS,
            args=(
                McpArg(
                    "reset",
                    Annotated[
                        bool,
                        Field(
                            description="Recount the whole observation log from the start on "
                            "purpose (only after the log was replaced or truncated)."
                        ),
                    ],
                    False,
                ),
            ),
        ),
    ),
)

# The order ``watcher --help`` lists them in is click's (by name); the MCP tools keep this
# order, which is the one they were first listed in.
_BY_NAME = {command.name: command for command in COMMANDS}
assert len(_BY_NAME) == len(COMMANDS), "two commands of one name"


def command(name: str) -> Command:
    """The entry named ``name`` (``KeyError`` for none)."""
    return _BY_NAME[name]


# Each command's result model, by name: what its envelope's ``result`` holds.
RESULTS: dict[str, type[BaseModel]] = {c.name: c.result for c in COMMANDS}


def envelope_schema(name: str) -> dict[str, Any]:
    """The JSON schema of command ``name``'s envelope, its ``result`` typed as the command's model."""
    model: type[BaseModel] = cast(Any, Envelope)[RESULTS[name]]
    return model.model_json_schema(mode="serialization")
