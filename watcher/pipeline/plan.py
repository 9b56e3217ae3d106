"""SPEC §7 step 1: plan without the lock (the network happens here, never under it).

A plan is a list of comments in the order they will be met, each with the *fingerprint* of its
state as read now; the locked part compares it again and defers what changed meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from watcher import inbox
from watcher.errors import UsageError
from watcher.inbox import Fingerprint
from watcher.models import Comment, SeenFile
from watcher.pipeline.batch import Batch
from watcher.source import FetchResult, SourceArticle, resolve_source


@dataclass(frozen=True)
class Planned:
    id: str
    fingerprint: Fingerprint
    comment: Comment | None = None  # set for comments this run discovered
    parent_text: str | None = None


@dataclass(frozen=True)
class Plan:
    items: list[Planned]
    # Articles whose comment list this run fetched: their change signal is recorded under the lock.
    articles: Sequence[SourceArticle] = ()


def check_id(comment_id: str) -> None:
    if not inbox.is_valid_id(comment_id):
        raise UsageError(f"{comment_id!r} is not a comment id (expected 1–16 lower-case letters or digits)")


def fetch(batch: Batch, index: SeenFile, source: str | None) -> FetchResult:
    """Comments from the source ``--source`` names, else dev.to (the commands layer made sure an
    account is configured: a missing one is exit 2, never a silent fallback to the sample)."""
    return resolve_source(source or "devto").fetch(batch.settings, index)


def plan_scan(batch: Batch, index: SeenFile, source: str | None) -> Plan:
    """New comments (no inbox file yet), pending ones (no attempt) and orphaned reservations, oldest first."""
    fetched = fetch(batch, index, source)
    for rejection in fetched.rejected:
        batch.result.rejected.append({"item": rejection.item, "message": rejection.message})
        batch.notice(f"rejected {rejection.item or 'item'}: {rejection.message}")
        batch.emit("input.rejected")
    paths = batch.settings.paths
    planned: dict[str, tuple[str, Planned]] = {}
    for comment in fetched.comments:
        if not paths.inbox_file(comment.id).exists():
            parent = fetched.parent_texts.get(comment.parent_id) if comment.parent_id else None
            planned[comment.id] = (comment.created_at, Planned(comment.id, inbox.EMPTY, comment, parent))
    batch.result.discovered = len(planned)
    for cid, entry in index.comments.items():
        # Pending ones get their first attempt; reserved ones are orphans of a dead run, which
        # scan closes as interrupted like recheck does (no call for them this run).
        if entry.status in ("pending", "reserved") and cid not in planned:
            record = inbox.load(paths, cid)
            if record is not None and inbox.state_of(record) in ("pending", "reserved"):
                planned[cid] = (record.comment.created_at, Planned(cid, inbox.fingerprint(record)))
    items = [p for _, p in sorted(planned.values(), key=lambda pair: (pair[0], pair[1].id))]
    articles = [a for a in fetched.articles if a.id in fetched.fetched_article_ids]
    return Plan(items, articles)


def plan_recheck(batch: Batch, index: SeenFile, ids: Sequence[str]) -> Plan:
    """Failed comments and orphaned reservations (or exactly ``ids``), oldest first."""
    paths = batch.settings.paths
    if ids:
        for cid in ids:
            check_id(cid)
        candidates = list(dict.fromkeys(ids))
    else:
        candidates = [cid for cid, e in index.comments.items() if e.status in ("failed", "reserved")]
    planned: list[tuple[str, Planned]] = []
    for cid in candidates:
        record = inbox.load(paths, cid)
        if record is None:
            if ids:
                raise UsageError(f"no comment {cid} in {paths.inbox} — run `watcher scan` first, or check the id")
            # The index knows it but its inbox file is gone (quarantined?): keep it in the plan so
            # the run reports it as skipped instead of passing over it in silence.
            planned.append(("", Planned(cid, inbox.EMPTY)))
            continue
        planned.append((record.comment.created_at, Planned(cid, inbox.fingerprint(record))))
    return Plan([p for _, p in sorted(planned, key=lambda pair: (pair[0], pair[1].id))])
