"""The free overviews: status (counts, provider, breaker, signals, paths) and articles
(SPEC §15.2)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from watcher.commands import tool_text as words
from watcher.commands.core import (
    TRIAGE_CHOICES,
    Context,
    repaired_index,
)
from watcher.commands.inbox import LISTABLE, needs_reply
from watcher.commands.results import (
    AgentClaims,
    ArticleRow,
    ArticlesResult,
    Cooldown,
    ModelUsage,
    NotifyStatus,
    StatusPaths,
    StatusResult,
    StatusSignals,
    TokenBudget,
)
from watcher.commands.spec import (
    LOCAL,
    READ_CODES,
    VIEW_CODES,
    Command,
    Mcp,
)
from watcher.config import Settings
from watcher.models import SeenFile, State, Triage
from watcher.pipeline import (
    read_cooldown,
)
from watcher.state import records
from watcher.store import Store

VIEWS = "watcher.cli.views"


def status(ctx: Context) -> StatusResult:
    settings, store = ctx.settings, ctx.store
    index = repaired_index(ctx)
    states: dict[State, int] = dict.fromkeys(State.__args__, 0)  # type: ignore[attr-defined]
    del states["forgotten"]  # `watcher forget`: out of every view (SPEC §16.3)
    triage: dict[Triage, int] = dict.fromkeys(TRIAGE_CHOICES, 0)
    for entry in index.comments.values():
        if entry.status == "forgotten":
            continue
        states[entry.status] += 1
        triage[entry.triage] += 1
    from watcher.pipeline import provider_state
    from watcher.util.timeutil import utcnow

    state = store.load_provider_state()
    cooldown = read_cooldown(
        store, state, now=(ctx.hooks.clock or utcnow)()
    )  # the clock batches judge it by
    breaker = provider_state.breaker_of(settings, state)
    counted = store.read_signal_state()
    trouble = store.signal_trouble(counted)  # no lock, no count: a warning, never exit 5
    signal_doc = StatusSignals(
        counts=counted.counts if counted else {},
        invalid=counted.invalid if counted else 0,
        warning=trouble or None,
    )
    return StatusResult(
        comments=len(index.comments),
        articles=len(index.articles),
        states=states,
        triage=triage,
        cooldown=Cooldown(until=cooldown.until, reason=cooldown.reason) if cooldown else None,
        breaker=breaker,
        claimed=_claims(ctx, index),
        signals=signal_doc,
        settings=settings.public(),
        paths=StatusPaths(
            data_dir=str(settings.data_dir),
            inbox=str(settings.paths.inbox),
            seen=str(settings.paths.seen),
            observations=str(settings.paths.observations),
        ),
        notify=_notify_status(settings, store),
        offline_quality=(
            _offline_quality()
            if settings.provider == "offline" and not settings.provider_defaulted
            else None
        ),
        this_month=_this_month(ctx, index),
        monthly_tokens=_token_budget(ctx),
    )


def _notify_status(settings: Settings, store: Store) -> NotifyStatus | None:
    """The targets, redacted, and the outbox read without a lock (SPEC §16.1); no Apprise."""
    if not settings.notify:
        return None
    from watcher.errors import StateError
    from watcher.notify.deliver import summary

    shown = [t.shown for t in settings.notify]
    try:
        found = summary(store.paths, settings.notify)
    except StateError as exc:
        return NotifyStatus(
            targets=shown, last_delivery=None, pending=0, gave_up=[], warning=str(exc)
        )
    return NotifyStatus(
        targets=shown,
        last_delivery=found.last_delivery,
        pending=found.pending,
        gave_up=found.gave_up,
    )


def _this_month(ctx: Context, index: SeenFile) -> list[ModelUsage] | None:
    """This month's calls per model (SPEC §16.4); none while WATCHER_PRICES is malformed (`usage`
    and `check` say why) or when over 500 comments were called this month."""
    from watcher.commands.usage import TooMany, usage
    from watcher.errors import ConfigError

    try:
        # Reading a file per comment called this month is what the line costs: past 500 (a
        # first scan of a large account), status leaves it to `watcher usage` and stays quick
        # (`python bench/run.py --only scale`).
        return usage(ctx, most_files=500, index=index).models or None
    except (ConfigError, TooMany):
        return None


def _token_budget(ctx: Context) -> TokenBudget | None:
    """WATCHER_MONTHLY_TOKENS and the month's tokens as the next call's check counts them."""
    budget = ctx.settings.monthly_tokens
    if budget is None:
        return None
    from watcher.pipeline.budget import month_used
    from watcher.util.timeutil import utcnow

    month = utcnow().strftime("%Y-%m")  # the months of the attempts' reserved_at (SPEC §16.4)
    return TokenBudget(budget=budget, used=month_used(ctx.store, month), month=month)


def _offline_quality() -> str:
    from watcher.providers.offline import MEASURED

    return (
        f"{MEASURED.said()} ({MEASURED.comments} comments, {MEASURED.held_out} of them unseen "
        "while its rules "
        "were written; `watcher eval --set bundled` measures it)"
    )


def _claims(ctx: Context, index: SeenFile) -> AgentClaims:
    """Attempts agents hold (SPEC §14): in flight (lease running, earliest end) or lease ended.

    Reads only the inbox files of reserved comments — a handful, not every file: status stays
    cheap at 50k comments. Which provider gave each verdict is in `inbox --all` and `show`
    (``verdict_by``), which read the files anyway."""
    from watcher.util.timeutil import utcnow

    now = (ctx.hooks.clock or utcnow)()  # leases are judged by the hooks' clock, as in a batch
    in_flight: list[str] = []
    ended = 0
    for cid, entry in index.comments.items():
        if entry.status != "reserved":
            continue
        record = ctx.store.load_record(cid)
        last = record.attempts[-1] if record and record.attempts else None
        if last is None or last.lease_until is None or last.outcome is not None:
            continue
        if records.lease_active(last, now):
            in_flight.append(last.lease_until)
        else:
            ended += 1
    return AgentClaims(
        in_flight=len(in_flight),
        earliest_lease_until=min(in_flight, default=None),
        lease_ended=ended,
    )


def articles(ctx: Context) -> ArticlesResult:
    """Per article: its comments, how many need a reply, the oldest one waiting, the last activity
    (SPEC §15.2). Free: reads the index and the inbox files of what is listed, calls nothing."""
    from watcher.util.timeutil import parse_iso, utcnow

    store = ctx.store
    index = repaired_index(ctx)
    now = (ctx.hooks.clock or utcnow)()
    rows: dict[int, dict[str, Any]] = {}
    for key, known in index.articles.items():
        rows[int(key)] = {
            "title": known.title,
            "url": known.url,
            "last": known.last_comment_at,
            "n": 0,
            "waiting": [],
        }
    for cid, entry in index.comments.items():
        row = rows.setdefault(
            entry.article_id, {"title": "", "url": None, "last": None, "n": 0, "waiting": []}
        )
        if entry.status in ("deleted", "hidden"):
            continue
        row["n"] += 1
        if entry.triage != "open" or entry.status not in LISTABLE:
            continue
        record = store.load_record(cid)
        if record is None:
            continue
        if not row["title"]:
            row["title"], row["url"] = record.comment.article_title, record.comment.article_url
        row.setdefault("newest", record.comment.created_at)
        if needs_reply(record, entry):
            row["waiting"].append(record.comment.created_at)
    out = []
    for aid, row in rows.items():
        oldest = min(row["waiting"], key=_sort_time, default=None)
        age = (
            None if oldest is None else round((now - parse_iso(oldest)).total_seconds() / 86400, 1)
        )
        out.append(
            ArticleRow(
                id=aid,
                title=row["title"],
                url=row["url"],
                comments=row["n"],
                need_reply=len(row["waiting"]),
                oldest_waiting=oldest,
                oldest_waiting_days=age,
                last_activity=row["last"] or row.get("newest"),
            )
        )
    out.sort(
        key=lambda r: (
            r.oldest_waiting_days is None,
            -(r.oldest_waiting_days or 0),
            -r.need_reply,
            -_sort_time(r.last_activity).timestamp() if r.last_activity else 0,
        )
    )
    return ArticlesResult(count=len(out), articles=out)


def _sort_time(text: str | None) -> datetime:
    from datetime import UTC

    from watcher.util.timeutil import parse_iso

    try:
        return parse_iso(text) if text else datetime.min.replace(tzinfo=UTC)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


STATUS = Command(
    name="status",
    summary="Counts, provider, breaker, signals and paths.",
    help="Counts by state, the provider (cooldown, breaker), signal counts and paths. Free: "
    "no key needed.",
    examples=("watcher status", "watcher --data-dir ~/devto status --json"),
    codes=VIEW_CODES,
    result=StatusResult,
    run=lambda c, a: status(c),
    view=f"{VIEWS}.reading:status",
    mcp=Mcp(description=words.STATUS, hints=LOCAL),
)


ARTICLES = Command(
    name="articles",
    summary="Per article: comments, how many wait, the oldest, activity.",
    help="Per article: comments, how many need a reply, the oldest one waiting and the last "
    "activity,\nwhat waits longest first. Free: no key needed.",
    examples=("watcher articles", "watcher articles --json"),
    codes=READ_CODES,
    result=ArticlesResult,
    run=lambda c, a: articles(c),
    view=f"{VIEWS}.reading:articles",
    mcp=Mcp(description=words.ARTICLES, hints=LOCAL),
)
