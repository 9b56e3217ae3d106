"""The batches: scan, recheck and demo — arguments in, a run to the pipeline (SPEC §15.1, §13.4)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from watcher import pipeline
from watcher.commands import tool_text as words
from watcher.commands.core import (
    SAMPLE,
    Context,
    batch_run,
    check_parallel,
    since_of,
)
from watcher.commands.inbox import inbox_view
from watcher.commands.results import (
    BatchResult,
    DemoResult,
)
from watcher.commands.spec import (
    BATCH_CODES,
    DRY_RUN,
    LIMIT,
    MCP_DRY_RUN,
    MCP_LIMIT,
    PARALLEL,
    SPENDS,
    Args,
    Command,
    IdItem,
    Mcp,
    McpArg,
    Param,
)
from watcher.config import load_settings
from watcher.errors import ConfigError, UsageError, WatcherError
from watcher.pipeline import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    Partial,
    check_limit,
)

VIEWS = "watcher.cli.views"


def scan(
    ctx: Context,
    *,
    limit: int = DEFAULT_LIMIT,
    dry_run: bool = False,
    source: str | None = None,
    since: str | None = None,
    full: bool = False,
    parallel: int | None = None,
) -> Partial[BatchResult]:
    check_limit(
        limit
    )  # a bad option first: nothing else is looked at (before the settings are read)
    check_parallel(parallel)
    since_at = since_of(since)
    if source == SAMPLE:
        ctx = _demo(ctx)
    elif source is None and not (ctx.settings.devto_username or ctx.settings.devto_api_key):
        # Cron does not inherit shell exports: scanning the sample instead would exit 0 forever.
        raise ConfigError(
            "no comment source: set DEVTO_USERNAME (or pass --source FILE); "
            "`watcher demo` shows what watcher does on the bundled sample comments"
        )
    return pipeline.scan(
        batch_run(ctx, "scan", limit=limit, dry_run=dry_run, parallel=parallel),
        source=source,
        notice=ctx.notice,
        since=since_at,
        full=full,
    )


def recheck(
    ctx: Context,
    *,
    limit: int = DEFAULT_LIMIT,
    dry_run: bool = False,
    ids: Sequence[str] = (),
    parallel: int | None = None,
) -> Partial[BatchResult]:
    check_limit(limit)
    check_parallel(parallel)
    return pipeline.recheck(
        batch_run(ctx, "recheck", limit=limit, dry_run=dry_run, parallel=parallel),
        ids=ids,
        notice=ctx.notice,
    )


def demo(ctx: Context) -> Partial[DemoResult]:
    """The bundled sample through the real pipeline (reservations, lock, verdicts), offline, in its
    own data dir (SPEC §13.4), then what needs a reply. Runs scan until nothing is left."""
    ready, account_dir = False, None
    with contextlib.suppress(WatcherError):  # a broken real setup does not stop the demo
        real = load_settings(overrides=ctx.overrides)  # the account's, not the demo's --data-dir
        ready = bool(real.devto_username or real.devto_api_key) and not real.provider_defaulted
        account_dir = None if real.data_dir_defaulted else str(real.data_dir)
    ctx = _demo(ctx)
    runs: list[BatchResult] = []
    error: WatcherError | None = None
    while len(runs) < 5:  # 23 sample comments at 20 calls a run: two runs
        out = pipeline.scan(
            batch_run(ctx, "scan", limit=MAX_LIMIT, dry_run=False),
            source=SAMPLE,
            notice=ctx.notice,
        )
        runs.append(out.result)
        error = out.error
        if error is not None or not out.result.remaining:
            break
    return Partial(
        DemoResult(
            data_dir=str(ctx.settings.data_dir),
            scans=runs,
            inbox=inbox_view(ctx),
            account_ready=ready,
            account_data_dir=account_dir,
        ),
        error,
    )


def _demo(ctx: Context) -> Context:
    from dataclasses import replace

    from watcher.config import demo_settings

    return replace(ctx, _settings=demo_settings(ctx.data_dir), _store=None)


def _scan_tool(c: Context, a: Args) -> Any:
    if a["source"] == SAMPLE:
        # SPEC §15.4: the sample's comments go to the demo's own data dir, which the server's
        # inbox and show never read; the person runs `watcher demo` instead.
        raise UsageError(words.SAMPLE_REFUSED)
    return _scan(c, a)


def _scan(c: Context, a: Args) -> Any:
    return scan(
        c,
        limit=a["limit"],
        dry_run=a["dry_run"],
        source=a["source"],
        since=a.get("since"),
        full=a.get("full", False),
        parallel=a.get("parallel"),
    )


DEMO = Command(
    name="demo",
    summary="See what it does, on bundled sample comments (offline).",
    help="Show what watcher does, on the bundled sample comments: the real pipeline with the "
    "offline\nclassifier (no network, no key), in its own data dir (--data-dir, else "
    "./data/demo), then\nwhat needs a reply. Never touches the data dir or provider your "
    "account uses.",
    examples=("watcher demo", "watcher --data-dir /tmp/try demo"),
    codes="0 ok · 5 the demo data dir cannot be written",
    result=DemoResult,
    run=lambda c, a: demo(c),
    view=f"{VIEWS}.batch:demo",
    batch=True,
    fetching="reading the sample comments…",
)


SCAN = Command(
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
                        description="'devto' (default) or a Forem export file's path; not 'sample'."
                    ),
                ],
                None,
            ),
        ),
    ),
)


RECHECK = Command(
    name="recheck",
    summary="Retry failed verdicts (3 attempts per comment in all).",
    help="Retry failed verdicts with the cached prompt; each comment gets 3 model attempts in "
    "all.\n\nAlso closes attempts a killed run left open (as interrupted, no call for them "
    "this run).",
    examples=("watcher recheck", "watcher recheck 3bkf --json", "watcher recheck --dry-run"),
    codes=BATCH_CODES,
    result=BatchResult,
    run=lambda c, a: recheck(
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
                    Field(description="Only these ids (default: every failed or interrupted one)."),
                ],
                None,
            ),
        ),
    ),
)
