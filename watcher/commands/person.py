"""What the person decides and checks: mark, grant, check, signals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated

from pydantic import Field

from watcher.commands import tool_text as words
from watcher.commands.core import (
    TRIAGE_CHOICES,
    Context,
)
from watcher.commands.results import (
    CheckResult,
    GrantResult,
    MarkResult,
    SignalsResult,
)
from watcher.commands.spec import (
    COMMENT_ID,
    MARKS,
    MCP_ID,
    PROBES,
    READ_CODES,
    Args,
    Command,
    IdItem,
    Mcp,
    McpArg,
    Param,
    whole_number,
)
from watcher.errors import UsageError
from watcher.pipeline import (
    Partial,
    check_id,
    new_run_id,
)

VIEWS = "watcher.cli.views"


def mark(ctx: Context, comment_ids: str | Sequence[str], triage: str) -> MarkResult:
    """The person's triage for one or more comments: every id is checked before anything is written,
    and one unknown id fails the whole command (SPEC §15.2)."""
    ids = [comment_ids] if isinstance(comment_ids, str) else list(dict.fromkeys(comment_ids))
    if not ids:
        raise UsageError("mark needs at least one comment id")
    for cid in ids:
        check_id(cid)
    if triage not in TRIAGE_CHOICES:
        raise UsageError(f"mark takes one of {', '.join(TRIAGE_CHOICES)}, got {triage!r}")
    from watcher.util.timeutil import iso

    # The mark's time is set against the author's replies on dev.to (the later wins, SPEC §15.2):
    # the run's clock, as batches judge leases and cooldowns by.
    entries = ctx.store.patch_triages(
        ids, triage, at=iso(ctx.hooks.clock()) if ctx.hooks.clock else None
    )
    if entries is None:
        known = ctx.store.load_index().comments
        missing = [cid for cid in ids if cid not in known and not ctx.store.has_record(cid)]
        raise UsageError(
            f"no comment {', '.join(missing) or ids[0]} — nothing was marked; "
            "`watcher inbox --all` lists the known ones"
        )
    return MarkResult(ids=ids, triage=triage, states={cid: e.status for cid, e in entries.items()})


def check(ctx: Context) -> Partial[CheckResult]:
    """Every free check (config, key, provider probe, dev.to user, data dir); exit 0 only if all
    pass."""
    from watcher.commands.checks import run_checks

    return Partial(*run_checks(ctx.data_dir, ctx.overrides, ctx.hooks.make_provider))


def grant(
    ctx: Context,
    comment_id: str,
    *,
    attempts: int = 1,
    confirm: Callable[[str], bool] | None = None,
) -> GrantResult:
    """More attempts for an exhausted or failed comment: the person's decision, never an agent's.

    ``confirm`` asks the person (the CLI's, which refuses without a terminal); ``None``: ``--yes``.
    """
    if ctx.entrypoint != "cli":
        raise UsageError(
            "grant is the person's decision: run `watcher grant ID` in a terminal. The bridge and "
            "the MCP server never raise a comment's budget of attempts"
        )
    check_id(comment_id)
    from watcher.pipeline.grant import grant as grant_attempts

    return grant_attempts(
        ctx.store,
        comment_id,
        attempts,
        entrypoint=ctx.entrypoint,
        run_id=new_run_id(),
        confirm=confirm,
    )


def signals_cmd(ctx: Context, *, reset: bool = False) -> SignalsResult:
    counted = ctx.store.count_signals(reset=reset)
    return SignalsResult(
        reset=reset,
        counts=counted.counts,
        invalid=counted.invalid,
        applied=counted.applied,
        new_lines=counted.new_lines,
    )


def _mark(c: Context, a: Args) -> MarkResult:
    *ids, triage = a["args"]
    if not ids:
        raise UsageError(
            "mark takes one or more comment ids and then replied, ignored or open "
            "(e.g. `watcher mark 3bkf replied`)"
        )
    return mark(c, ids, triage)


MARK = Command(
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
        run=lambda c, a: mark(c, [a["id"], *(a["more_ids"] or ())], a["triage"]),
        args=(
            MCP_ID,
            McpArg(
                "triage",
                Annotated[
                    str,
                    Field(
                        description="replied (reply posted), ignored (needs none) or open "
                        "(to do again).",
                        json_schema_extra={"enum": list(TRIAGE_CHOICES)},
                    ),
                ],
            ),
            McpArg(
                "more_ids",
                Annotated[
                    list[IdItem] | None,
                    Field(description="More ids, marked alike; one unknown id marks nothing."),
                ],
                None,
            ),
        ),
    ),
)


CHECK = Command(
    name="check",
    summary="Test the setup for free (no attempt, no tokens).",
    help="Check the setup for free: config, API key, the provider and model (its models "
    "endpoint,\nno tokens), the dev.to user, the data dir. Exit 0 only if all pass.",
    examples=("watcher check", "WATCHER_MODEL=gpt-6-luna watcher check --json"),
    codes="0 all pass · 2 fix the setup · 3 the provider or dev.to cannot be reached · "
    "5 the data dir cannot be written",
    result=CheckResult,
    run=lambda c, a: check(c),
    view=f"{VIEWS}.person:check",
    mcp=Mcp(description=words.CHECK, hints=PROBES),
)


GRANT = Command(
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
    run=lambda c, a: grant(c, a["id"], attempts=a["attempts"], confirm=None if a["yes"] else c.ask),
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
        run=lambda c, a: grant(c, str(a.get("id", ""))),
    ),
)


SIGNALS = Command(
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
    run=lambda c, a: signals_cmd(c, reset=a["reset"]),
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
                        description="Recount the whole log (only after it was replaced or "
                        "truncated)."
                    ),
                ],
                False,
            ),
        ),
    ),
)
