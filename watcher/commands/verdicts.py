"""eval: how good the verdicts are (SPEC §15.6), judged by what the person did."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from watcher.commands import tool_text as words
from watcher.commands.core import (
    Context,
    since_of,
)
from watcher.commands.results import (
    EvalResult,
)
from watcher.commands.spec import (
    LOCAL,
    Command,
    Mcp,
    McpArg,
    Param,
    whole_number,
)
from watcher.errors import UsageError
from watcher.pipeline import (
    Partial,
)

VIEWS = "watcher.cli.views"


def evaluate(
    ctx: Context,
    *,
    since: str | None = None,
    labelled_set: str | None = None,
    provider: str | None = None,
    provider_calls: int | None = None,
    eval_dir: str | None = None,
) -> EvalResult | Partial[EvalResult]:
    """Stored verdicts against what the author did — free: no model call, no write. With
    ``labelled_set``: that set judged in a data dir of its own, then the same figures."""
    from watcher.util.timeutil import iso

    since_at = since_of(since)
    since_text = iso(since_at) if since_at else None
    if labelled_set is None:
        stray = [
            flag
            for flag, value in (
                ("--provider", provider),
                ("--provider-calls", provider_calls),
                ("--eval-dir", eval_dir),
            )
            if value is not None
        ]
        if stray:
            raise UsageError(
                f"{', '.join(stray)} only go with --set (the labelled set); `watcher eval` alone "
                "judges "
                "the verdicts already stored and makes no call"
            )
        from watcher.commands.evaluate import evaluate as judge

        if not ctx.store.exists():
            ctx.notice(
                f"note: data dir {ctx.settings.data_dir} does not exist (yet): nothing to evaluate "
                "— check "
                "--data-dir / WATCHER_DATA_DIR"
            )
        return judge(ctx.store, since=since_at, since_text=since_text)
    from watcher.commands import labelled

    return labelled.evaluate_set(
        labelled_set,
        user=ctx.settings,
        hooks=ctx.hooks,
        entrypoint=ctx.entrypoint,
        provider=provider,
        budget=provider_calls,
        eval_dir=eval_dir,
        since=since_at,
        since_text=since_text,
    )


EVAL = Command(
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
        (
            "watcher eval --set bundled --provider openai --provider-calls 200 "
            "--eval-dir ~/watcher-eval"
        ),
    ),
    codes="0 ok · 2 bad option or unusable set, or a paid provider without --provider-calls "
    "and --eval-dir · 3 (--set with a provider) stopped by the provider · 5 corrupt state "
    "file (moved to quarantine/)",
    result=EvalResult,
    run=lambda c, a: evaluate(
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
                        description="Only comments created since this date (2026-11-01) or "
                        "ISO time."
                    ),
                ],
                None,
            ),
        ),
    ),
)
