"""SPEC §7 step 1: plan without the lock (the network happens here, never under it).

A plan is a list of comments in the order they will be met, each with the *fingerprint* of its
state as read now; the locked part compares it again and defers what changed meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from watcher.commands.results import Rejected
from watcher.errors import UsageError, WatcherError
from watcher.models import Comment, GoneKind, InboxRecord, Prompt, Reply, SeenComment, SeenFile
from watcher.pipeline.batch import Batch
from watcher.source import FetchResult, Source, SourceArticle, resolve_source
from watcher.state import records, seen
from watcher.state.records import Fingerprint
from watcher.util.timeutil import parse_iso, utcnow


@dataclass(frozen=True)
class Planned:
    id: str
    fingerprint: Fingerprint
    comment: Comment | None = None  # set for comments this run discovered
    parent_text: str | None = None
    baseline: bool = False  # a discovered comment older than the first scan's backlog window
    replied_at: str | None = None  # a discovered comment the author had already answered
    replies: tuple[
        Reply, ...
    ] = ()  # the author's direct replies to a discovered comment (for show)


@dataclass(frozen=True)
class PlannedEdit:
    """A known comment's new text, its prompt rendered before the lock (SPEC §15.2)."""

    article_id: int
    text: str
    prompt: Prompt


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
    # What dev.to changed about known comments (SPEC §15.2), applied under the lock: new texts,
    # deleted or hidden ones (kind, why), ones back from hiding, the author's replies to show.
    edits: Mapping[str, PlannedEdit] = field(default_factory=dict)
    gone: Mapping[str, tuple[GoneKind, str]] = field(default_factory=dict)
    restored: frozenset[str] = frozenset()
    reply_nodes: Mapping[str, list[Reply]] = field(default_factory=dict)
    latest_replies: Mapping[str, str] = field(default_factory=dict)

    @property
    def changes_known(self) -> bool:
        return bool(self.edits or self.gone or self.restored or self.reply_nodes)


def check_id(comment_id: str) -> None:
    if not records.is_valid_id(comment_id):
        raise UsageError(
            f"{comment_id!r} is not a comment id (expected 1–16 lower-case letters or digits)"
        )


def _fetch(batch: Batch, source: Source, index: SeenFile, *, full: bool) -> FetchResult:
    """Comments from ``source`` (the commands layer made sure an account is configured for dev.to:
    a missing one is exit 2, never a silent fallback to the sample)."""
    return source.fetch(batch.settings, index, full=full)


def plan_scan(
    batch: Batch,
    index: SeenFile,
    source: str | None,
    *,
    since: datetime | None = None,
    full: bool = False,
) -> Plan:
    """New comments (no inbox file yet), pending ones (no attempt) and orphaned reservations,
    oldest first. On an account's first scan, comments older than the backlog window are recorded
    as baseline, not called (``since`` moves the window); answered ones are never called."""
    name = source or "devto"
    make_source = batch.run.hooks.make_source
    chosen = make_source(name) if make_source is not None else resolve_source(name)
    fetched = _fetch(batch, chosen, index, full=full)
    batch.result.articles = len(fetched.articles)
    _note_rejections(batch, fetched)
    store = batch.store
    replies = dict(fetched.author_replies)
    cutoff = _backlog_cutoff(batch, index, chosen, since)
    discovered: list[Planned] = []
    planned: dict[str, tuple[str, Planned]] = {}
    known: dict[str, Comment] = {}
    for comment in fetched.comments:
        if store.has_record(comment.id):
            known[comment.id] = comment
            continue
        parent = fetched.parent_texts.get(comment.parent_id) if comment.parent_id else None
        old = cutoff is not None and _created(comment.created_at) < cutoff
        item = Planned(
            comment.id,
            records.EMPTY,
            comment,
            parent,
            baseline=old,
            replied_at=replies.get(comment.id),
            replies=tuple(fetched.reply_nodes.get(comment.id, ())),
        )
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
    changes = _known_changes(batch, index, fetched, known, planned)
    items = [p for _, p in sorted(planned.values(), key=lambda pair: (pair[0], pair[1].id))]
    articles = [a for a in fetched.articles if a.id in fetched.fetched_article_ids]
    return Plan(
        items,
        articles,
        discovered,
        answered,
        replies,
        frozenset(requeued),
        fetched.interrupted,
        edits=changes.edits,
        gone=changes.gone,
        restored=frozenset(changes.restored),
        reply_nodes=changes.reply_nodes,
        latest_replies=dict(fetched.latest_replies),
    )


def _note_rejections(batch: Batch, fetched: FetchResult) -> None:
    for rejection in fetched.rejected:
        batch.result.rejected.append(Rejected(item=rejection.item, message=rejection.message))
        batch.notice(f"rejected {rejection.item or 'item'}: {rejection.message}")
        batch.emit("input.rejected")


def _backlog_cutoff(
    batch: Batch, index: SeenFile, chosen: Source, since: datetime | None
) -> datetime | None:
    """Comments older than this are recorded as baseline, not called. The first scan of an
    account: a 500-comment history must not cost 500 calls, nor delay today's comments by a
    hundred cron runs (SPEC §13.3). An export file (or the sample) is a deliberate import: every
    comment in it is meant to be checked."""
    if since is None and chosen.name == "devto" and not index.comments and not index.articles:
        return utcnow() - timedelta(days=batch.settings.backlog_days)
    return since


@dataclass
class _Changes:
    edits: dict[str, PlannedEdit] = field(default_factory=dict)
    gone: dict[str, tuple[GoneKind, str]] = field(default_factory=dict)
    restored: set[str] = field(default_factory=set)
    reply_nodes: dict[str, list[Reply]] = field(default_factory=dict)


MISSING = "missing from its thread on dev.to (deleted there)"


def _known_changes(
    batch: Batch,
    index: SeenFile,
    fetched: FetchResult,
    known: Mapping[str, Comment],
    planned: dict[str, tuple[str, Planned]],
) -> _Changes:
    """What the fetched threads changed about comments already on disk (SPEC §15.2): edits (a new
    first attempt is planned for each that goes to the model), deletions and hiding, the author's
    replies. Only a thread fetched whole can delete by absence (a partial fetch deletes nothing)."""
    from watcher.providers import (
        prompts,  # the template is read only by commands that may write records
    )

    changes = _Changes()
    store = batch.store
    for cid, comment in known.items():
        record = store.load_record(cid)
        if record is None:
            continue
        if record.gone is not None:
            changes.restored.add(cid)  # shown again (un-hidden): it is on dev.to after all
        nodes = fetched.reply_nodes.get(cid, [])
        if nodes != record.author_replies and (nodes or record.author_replies):
            changes.reply_nodes[cid] = nodes
        if comment.text == record.comment.text:
            continue
        parent = fetched.parent_texts.get(comment.parent_id) if comment.parent_id else None
        prompt = prompts.render(
            record.comment.model_copy(update={"text": comment.text}), parent_text=parent
        )
        changes.edits[cid] = PlannedEdit(comment.article_id, comment.text, prompt)
        entry = index.comments.get(cid)
        if (
            _open_reservation(record)
            or record.gone is not None
            or answered_or_marked(entry, fetched.latest_replies.get(cid))
        ):
            continue  # applied (or deferred) under the lock, never called this run
        after = records.apply_edit(record, comment.text, prompt, judged=True)
        if records.state_of(after) == "pending" and not after.baseline and after.replied_at is None:
            planned[cid] = (record.comment.created_at, Planned(cid, records.fingerprint(after)))
    for cid, why in fetched.gone.items():
        entry = index.comments.get(cid)
        if entry is not None and entry.status != why[0]:
            changes.gone[cid] = why
    # An idle scan fetches no thread: no walk over a 50k-comment index (bench/run.py, status and
    # scan at 50k).
    for cid, entry in index.comments.items() if fetched.whole else ():
        aid = entry.article_id
        if (
            aid in fetched.whole
            and cid not in fetched.thread_ids.get(aid, ())
            and entry.status != "deleted"
        ):
            changes.gone[cid] = ("deleted", MISSING)
    return changes


def answered_or_marked(entry: SeenComment | None, latest_reply: str | None) -> bool:
    """Whether the author has dealt with the comment, so an edit of it is recorded, never called
    (SPEC §15.2): marked replied or ignored, or answered on dev.to — in this fetch too — after any
    `mark open` of the person's (the latest of the author's actions wins)."""
    if entry is not None and entry.triage != "open":
        return True
    if latest_reply is None:
        return False
    if entry is None or entry.triage_by != "person" or entry.triage_at is None:
        return True
    return seen.later(latest_reply, entry.triage_at)


def _open_reservation(record: InboxRecord) -> bool:
    return bool(record.attempts) and record.attempts[-1].outcome is None


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
        candidates = [
            cid for cid, e in index.comments.items() if e.status in ("failed", "reserved")
        ]
    planned: list[tuple[str, Planned]] = []
    for cid in candidates:
        record = store.load_record(cid)
        if record is None:
            if ids:
                raise UsageError(
                    f"no comment {cid} in {store.paths.inbox} — run `watcher scan` first, or "
                    "check the id"
                )
            # The index knows it but its inbox file is gone (quarantined?): keep it in the plan so
            # the run reports it as skipped instead of passing over it in silence.
            planned.append(("", Planned(cid, records.EMPTY)))
            continue
        planned.append((record.comment.created_at, Planned(cid, records.fingerprint(record))))
    return Plan([p for _, p in sorted(planned, key=lambda pair: (pair[0], pair[1].id))])
