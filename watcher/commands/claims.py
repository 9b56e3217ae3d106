"""Provider agent (SPEC §14): claim reserves attempts for the agent, submit stores its verdicts."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Annotated, Any

from pydantic import Field

from watcher.commands import tool_text as words
from watcher.commands.core import (
    Context,
    batch_run,
    run_of,
)
from watcher.commands.results import (
    ClaimResult,
    SubmitResult,
)
from watcher.commands.spec import (
    AGENT,
    COMMENT_ID,
    LIMIT,
    MCP_ID,
    Args,
    Command,
    Mcp,
    McpArg,
    Param,
    whole_number,
)
from watcher.pipeline import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    Partial,
    check_limit,
)

VIEWS = "watcher.cli.views"


def claim(ctx: Context, *, limit: int = DEFAULT_LIMIT) -> Partial[ClaimResult]:
    """Provider agent (SPEC §14): reserve attempts for the agent, hand it the prompts to judge."""
    from watcher.pipeline import agent

    check_limit(limit)
    agent.require_agent(ctx.settings.provider)
    return agent.claim(batch_run(ctx, "claim", limit=limit, dry_run=False), notice=ctx.notice)


def submit(ctx: Context, comment_id: str, n: int, verdict: Any) -> Partial[SubmitResult]:
    """Provider agent (SPEC §14): the agent's verdict for attempt ``n`` that claim handed out."""
    from watcher.pipeline import agent

    # No provider or key check: the attempt says whether an agent claimed it, whatever is configured
    # now.
    return agent.submit(run_of(ctx, "submit"), comment_id, n, verdict, notice=ctx.notice)


def _submit(c: Context, a: Args) -> Any:
    verdict = sys.stdin.read() if a["verdict"] == "-" else a["verdict"]
    return submit(c, a["id"], a["n"], verdict)


CLAIM = Command(
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
    run=lambda c, a: claim(c, limit=a["limit"]),
    view=f"{VIEWS}.batch:claim",
    params=(replace(LIMIT, help="Most comments to claim (1–20)."),),
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
)


SUBMIT = Command(
    name="submit",
    summary="Provider agent: store the agent's verdict.",
    help="Store the agent's verdict for attempt N of a claimed comment.\n\nOnly the open "
    "claim is accepted (a duplicate or a late submit changes nothing). A verdict that\nfails "
    "the schema is recorded as the attempt's error and counts, as a model's would.",
    examples=(
        (
            'watcher submit 3bkf 1 \'{"needs_reply": true, "category": "question", '
            '"priority": "normal", "summary": "Asks about X.", "reply_hint": ""}\''
        ),
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
        run=lambda c, a: submit(c, a["id"], a["n"], a["verdict"]),
        args=(
            MCP_ID,
            McpArg(
                "n",
                Annotated[
                    int,
                    Field(
                        description="The attempt number claim returned.",
                        json_schema_extra={"minimum": 1},
                    ),
                ],
            ),
            McpArg(
                "verdict",
                Annotated[
                    dict[str, Any] | str,
                    Field(
                        description="A JSON object (or its text) fitting the schema claim returned."
                    ),
                ],
            ),
        ),
    ),
)
