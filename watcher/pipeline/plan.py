"""SPEC §7 step 1: plan without the lock (the network happens here, never under it).

A plan is a list of comments in the order they will be met, each with the *fingerprint* of its
state as read now; the locked part compares it again and defers what changed meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from watcher import records
from watcher.errors import UsageError, WatcherError
from watcher.models import Comment, SeenFile
from watcher.pipeline.batch import Batch
from watcher.records import Fingerprint
from watcher.results import Rejected
from watcher.source import FetchResult, Source, SourceArticle, resolve_source
from watcher.timeutil import parse_iso, utcnow


@dataclass(frozen=True)
class Planned:
    id: str
    fingerprint: Fingerprint
    comment: Comment | None = None  # set for comments this run discovered
    parent_text: str | None = None
    baseline: bool = False  # a discovered comment older than the first scan's backlog window
    replied_at: str | None = None  # a discovered comment the author had already answered


@dataclass(frozen=True)
class Plan:
    items: list[Planned]  # the comments this run may call for, in order
    # Articles whose comment list this run fetched: their change signal is recorded under the lock.
    articles: Sequence[SourceArticle] = ()
    # Every comment this run discovered, callable or not: inbox files are made for all of them.
    discovered: Sequence[Planned] = ()
    # Known comments with no attempt yet that the author answered meanwhile (id -> when): they
    # become "answered" under the lock and are never called.
    answered: Mapping[str, str] = field(default_factory=dict)
    # Every author reply the source saw (id -> when): seen.json marks those comments replied.
    replies: Mapping[str, str] = field(default_factory=dict)
    # Baseline comments `scan --since` queues: their baseline flag is cleared under the lock.
    requeued: frozenset[str] = frozenset()
    # A source failure midway (dev.to 429, outage): what was fetched is processed, then exit 3.
    interrupted: WatcherError | None = None


def check_id(comment_id: str) -> None:
    if not records.is_valid_id(comment_id):
        raise UsageError(f"{comment_id!r} is not a comment id (expected 1–16 lower-case letters or digits)")


def _fetch(batch: Batch, source: Source, index: SeenFile, *, full: bool) -> FetchResult:
    """Comments from ``source`` (the commands layer made sure an account is configured for dev.to:
    a missing one is exit 2, never a silent fallback to the sample)."""
    return source.fetch(batch.settings, index, full=full)


def plan_scan(batch: Batch, index: SeenFile, source: str | None, *, since: datetime | None = None,
              full: bool = False) -> Plan:
    """New comments (no inbox file yet), pending ones (no attempt) and orphaned reservations,
    oldest first. On an account's first scan, comments older than the backlog window are recorded
    as baseline, not called (``since`` moves the window); answered ones are never called."""
    name = source or "devto"
    make_source = batch.run.hooks.make_source
    chosen = make_source(name) if make_source is not None else resolve_source(name)
    fetched = _fetch(batch, chosen, index, full=full)
    batch.result.articles = len(fetched.articles)
    for rejection in fetched.rejected:
        batch.result.rejected.append(Rejected(item=rejection.item, message=rejection.message))
        batch.notice(f"rejected {rejection.item or 'item'}: {rejection.message}")
        batch.emit("input.rejected")
    store = batch.store
    replies = dict(fetched.author_replies)
    cutoff = since
    if cutoff is None and chosen.name == "devto" and not index.comments and not index.articles:
        # The first scan of an account: a 500-comment history must not cost 500 calls, nor delay
        # today's comments by a hundred cron runs (SPEC §13.3). An export file (or the sample)
        # is a deliberate import: every comment in it is meant to be checked.
        cutoff = utcnow() - timedelta(days=batch.settings.backlog_days)
    discovered: list[Planned] = []
    planned: dict[str, tuple[str, Planned]] = {}
    for comment in fetched.comments:
        if store.has_record(comment.id):
            continue
        parent = fetched.parent_texts.get(comment.parent_id) if comment.parent_id else None
        old = cutoff is not None and _created(comment.created_at) < cutoff
        item = Planned(comment.id, records.EMPTY, comment, parent, baseline=old, replied_at=replies.get(comment.id))
        discovered.append(item)
        if not item.baseline and item.replied_at is None:
            planned[comment.id] = (comment.created_at, item)
    batch.result.discovered = len(discovered)
    answered: dict[str, str] = {}
    requeued: set[str] = set()
    for cid, entry in index.comments.items():
        if cid in planned or entry.status not in ("pending", "reserved", "baseline"):
            continue
        if entry.status == "baseline" and since is None and cid not in replies:
            continue  # a 500-comment backlog must not cost 500 file reads on every idle scan
        # Pending ones get their first attempt; reserved ones are orphans of a dead run, which
        # scan closes as interrupted like recheck does (no call for them this run).
        record = store.load_record(cid)
        if record is None:
            continue
        state = records.state_of(record)
        if state in ("pending", "baseline") and cid in replies:
            answered[cid] = replies[cid]
            continue
        if state == "baseline":
            if since is None or _created(record.comment.created_at) < since:
                continue
            requeued.add(cid)
        elif state not in ("pending", "reserved"):
            continue
        planned[cid] = (record.comment.created_at, Planned(cid, records.fingerprint(record)))
    items = [p for _, p in sorted(planned.values(), key=lambda pair: (pair[0], pair[1].id))]
    articles = [a for a in fetched.articles if a.id in fetched.fetched_article_ids]
    return Plan(items, articles, discovered, answered, replies, frozenset(requeued), fetched.interrupted)


def _created(text: str) -> datetime:
    try:
        return parse_iso(text)
    except ValueError:
        return utcnow()  # unreadable: treat as new, so it is checked rather than silently skipped


def plan_recheck(batch: Batch, index: SeenFile, ids: Sequence[str]) -> Plan:
    """Failed comments and orphaned reservations (or exactly ``ids``), oldest first."""
    store = batch.store
    if ids:
        for cid in ids:
            check_id(cid)
        candidates = list(dict.fromkeys(ids))
    else:
        candidates = [cid for cid, e in index.comments.items() if e.status in ("failed", "reserved")]
    planned: list[tuple[str, Planned]] = []
    for cid in candidates:
        record = store.load_record(cid)
        if record is None:
            if ids:
                raise UsageError(f"no comment {cid} in {store.paths.inbox} — run `watcher scan` first, or check the id")
            # The index knows it but its inbox file is gone (quarantined?): keep it in the plan so
            # the run reports it as skipped instead of passing over it in silence.
            planned.append(("", Planned(cid, records.EMPTY)))
            continue
        planned.append((record.comment.created_at, Planned(cid, records.fingerprint(record))))
    return Plan([p for _, p in sorted(planned, key=lambda pair: (pair[0], pair[1].id))])
