"""SPEC §7 steps 2, 3 and 5: what a batch writes under the pipeline lock besides its calls (§15.1).

:func:`carry_out` creates the records the plan discovered, writes what the gate must write first
(a cooldown never written, a breaker of another setup closed), applies what dev.to changed (edits,
deletions, the author's replies) one record per hold, hands the comments to
:func:`watcher.pipeline.process.process` (step 4: decide, reserve, call, outcome) and saves the
index last. The agent's claim and submit (:mod:`watcher.pipeline.agent`) share
:func:`reconcile_index` and :func:`save_index`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from watcher.errors import LockBusy, StateError
from watcher.models import InboxRecord, SeenComment, SeenFile
from watcher.pipeline import provider_state
from watcher.pipeline.batch import Batch
from watcher.pipeline.gate import Gate
from watcher.pipeline.plan import Plan, Planned, answered_or_marked
from watcher.pipeline.process import process
from watcher.source import SourceArticle
from watcher.state import records, seen


def carry_out(batch: Batch, plan: Plan, base: SeenFile, gate: Gate) -> None:
    """Steps 2–5 of SPEC §7, with the pipeline lock held for decisions and writes only (§15.1):
    once per record to create what the plan discovered and to apply what dev.to changed, once for
    the provider state a gate must write first, once per comment to decide and reserve, once per
    answer to write its outcome, once to save the index."""
    store = batch.store
    if plan.items and batch.calls_model and gate.error is None:
        # The call locks of the comments this run may call, made in a row before the run's first
        # durable write rather than one by one between them (watcher.store.locks.make_call_locks).
        store.make_call_locks(item.id for item in plan.items[: batch.run.limit])
    _create_discovered(batch, plan.discovered)
    _drop_texts(plan)
    if gate.close_breaker or gate.pending is not None:
        with store.pipeline_lock():  # a hold only when there is a write to make
            if gate.pending is not None:
                # A 429's cooldown the run that met it could not write (SPEC §15.5): written
                # before any call; a failure here is exit 5, and the gate is closed anyway.
                provider_state.write_pending(store, gate.pending)
            if gate.close_breaker:
                provider_state.close_breaker(store)
    _update_uncalled(batch, plan)
    held, judged = _apply_known_changes(batch, plan)
    batch.result.answered += len(plan.answered)
    # Without the lock: reading every changed record would make the hold grow with the account
    # (bench/run.py, lock waits during a batch). Each comment is re-read under the lock before
    # anything is decided, and the index's attempt counts only ever grow, so an index a moment
    # old is safe for decide.
    ours = {
        *batch.result.edited,
        *batch.result.gone,
        *plan.restored,
        *plan.reply_nodes,
        *plan.answered,
        *plan.requeued,
    }
    mine = _record_articles(
        reconcile_index(batch, base, ours), [a for a in plan.articles if a.id not in held]
    )
    mine = _relisted(mine, judged)
    counted = {cid: entry.attempts for cid, entry in mine.comments.items()}
    try:
        process(batch, plan.items, gate, counted)
    finally:
        try:
            with store.pipeline_lock():
                _retry_provider_state(batch)
                save_index(
                    batch,
                    base,
                    mine,
                    plan.replies,
                    [*plan.edits, *plan.gone, *plan.restored],
                    latest=plan.latest_replies,
                )
        except LockBusy as exc:
            # The inbox files hold the truth; the next command repairs the index from them (§4.2).
            batch.fail(exc)


def _retry_provider_state(batch: Batch) -> None:
    """Under the lock, as the run ends: the cooldown (or breaker) an answer left that could not be
    written then, once more (SPEC §15.5). Still failing, the next run finds a 429's cooldown on its
    attempt (provider_state.pending_cooldown), and the run has exited 5 already."""
    unsaved, batch.unsaved_state = batch.unsaved_state, None
    if unsaved is None:
        return
    with contextlib.suppress(StateError):
        provider_state.write_unsaved(batch.store, unsaved)


def reconcile_index(batch: Batch, base: SeenFile, ours: Iterable[str] = ()) -> SeenFile:
    """The index brought up to the inbox files; repairs are reported (§4.2) — not the records this
    run itself just changed (``ours``): the index following them is no repair."""
    mine, changed = batch.store.reconcile_index(base)
    skip = set(ours)
    batch.result.repaired = sorted(
        cid for cid in changed if cid in base.comments and cid not in skip
    )
    for cid in batch.result.repaired:
        batch.emit("state.repaired", comment=cid)
    return mine


def save_index(
    batch: Batch,
    base: SeenFile,
    mine: SeenFile,
    replies: Mapping[str, str],
    touched: Iterable[str] = (),
    *,
    latest: Mapping[str, str] | None = None,
) -> None:
    """Save seen.json last, reconciled for every comment the run reached (and ``touched``)."""
    # The index is saved last: if we die before this, the inbox files already hold the truth and
    # the next command repairs the index from them (SPEC §4.2). A failed save fails the run
    # (exit 5) but keeps its summary: the calls were made and the user must see them.
    store = batch.store
    try:
        ids = dict.fromkeys([*(i.id for i in batch.result.items), *touched])
        mine, _ = store.reconcile_index(mine, list(ids))
        store.save_index(base, mine)
        # The author's replies on dev.to close the loop: those comments leave the inbox (§13.3).
        marked = store.note_author_replies(replies, latest)
        # Comments answered before any attempt are counted as answered already: "replied" is the
        # ones the inbox held until the author's reply was seen (one count each, not both).
        batch.result.replied = [
            cid
            for cid in marked
            if (entry := mine.comments.get(cid)) is None or entry.status != "answered"
        ]
        batch.result.unmarked = sum(
            1
            for cid, entry in mine.comments.items()
            if entry.status == "done" and entry.triage == "open" and cid not in marked
        )
    except StateError as exc:
        batch.fail(exc)


def _record_articles(index: SeenFile, articles: Sequence[SourceArticle]) -> SeenFile:
    for article in articles:
        known = index.articles.get(str(article.id))
        # Both halves of the change signal (SPEC §13.3): comments_count alone misses a new comment
        # that a deletion cancelled out; last_comment_at moves on every comment create and delete.
        signal = (article.comments_count, article.title, article.last_comment_at)
        if known is None or (known.comments_count, known.title, known.last_comment_at) != signal:
            index = seen.record_article(
                index,
                article.id,
                title=article.title,
                url=article.url,
                comments_count=article.comments_count,
                last_comment_at=article.last_comment_at,
            )
    return index


# Records created per hold of the pipeline lock: a first scan may discover hundreds, and a run
# waiting behind it must not wait for all of them (bench/run.py measures the longest hold).
CREATE_PER_HOLD = 1


def _create_discovered(batch: Batch, plan: Sequence[Planned]) -> None:
    """Inbox files for comments this run discovered: prompt rendered once, cached, no attempts.

    The prompts are rendered before the lock; each record is written under it, if it is still
    missing and its history was not lost."""
    from watcher.providers import (
        prompts,  # the template is read only by commands that create records
    )

    store = batch.store
    # Rendered a hold's worth at a time, never all at once: a first scan discovers every comment
    # of the account, and 20,000 rendered records at once would be a third of its peak memory
    # (bench/memory.py).
    todo = [item for item in plan if item.comment is not None and not store.has_record(item.id)]
    known: dict[str, SeenComment] | None = None
    for start in range(0, len(todo), CREATE_PER_HOLD):
        fresh = [_new_record(item, prompts) for item in todo[start : start + CREATE_PER_HOLD]]
        with store.pipeline_lock():
            known = store.load_index().comments if known is None else known  # read under the lock
            for record in fresh:
                cid = record.comment.id
                if store.has_record(cid) or store.history_lost(cid, known.get(cid)):
                    # Made meanwhile by another run; or its attempts and any saved verdict live only
                    # in a lost or quarantined copy, and a fresh record would start the budget over
                    # and re-request a saved verdict (SPEC §1): none is made until the user restores
                    # it, and reread reports it skipped.
                    continue
                store.save_record(record)
    batch.result.baseline = sum(1 for item in plan if item.baseline and not item.replied_at)
    batch.result.answered = sum(1 for item in plan if item.replied_at)


def _drop_texts(plan: Plan) -> None:
    """The discovered comments are in their records now: the plan keeps what the rest of the run
    reads of them (ids, fingerprints, flags), not their texts and prompts' inputs, so that memory
    holds the index built next. A first scan of 20,000 comments peaks a third higher when the
    plan holds every comment to the end (bench/memory.py). In place: the caller's plan is this one.
    """
    if not plan.discovered:
        return
    bare = {
        item.id: dataclasses.replace(item, comment=None, parent_text=None, replies=())
        for item in plan.discovered
    }
    for items in (plan.discovered, plan.items):
        if isinstance(items, list):
            items[:] = [bare.get(item.id, item) for item in items]


def _new_record(item: Planned, prompts: Any) -> InboxRecord:
    """A discovered comment's record: its prompt rendered and cached, no attempts."""
    assert item.comment is not None
    record = records.new_record(
        item.comment, prompts.render(item.comment, parent_text=item.parent_text)
    )
    if item.baseline or item.replied_at or item.replies:
        record = record.model_copy(
            update={
                "baseline": item.baseline,
                "replied_at": item.replied_at,
                "author_replies": list(item.replies),
            }
        )
    return record


def _update_uncalled(batch: Batch, plan: Plan) -> None:
    """Under the lock, one hold each, for comments that have had no attempt: the author answered
    them meanwhile (never to be called), or `scan --since` queued a baseline one. Re-read first: a
    comment that got an attempt since planning is left as it is."""
    store = batch.store
    changes: dict[str, dict[str, object]] = {
        cid: {"replied_at": when} for cid, when in plan.answered.items()
    }
    for cid in plan.requeued:
        changes.setdefault(cid, {})["baseline"] = False
    for cid, update in changes.items():
        with store.pipeline_lock():  # one record per hold, as _create_discovered
            record = store.load_record(cid)
            if record is None or record.attempts or record.verdict is not None:
                continue
            store.save_record(record.model_copy(update=update))


def _relisted(index: SeenFile, ids: Iterable[str]) -> SeenFile:
    """An edit the model judges again is news for `inbox --new` once more (a thanks edited into a
    question must reach the cron mail): its listed_at is cleared."""
    comments = dict(index.comments)
    for cid in ids:
        entry = comments.get(cid)
        if entry is not None and entry.listed_at is not None:
            comments[cid] = entry.model_copy(update={"listed_at": None})
    return index if comments == index.comments else index.model_copy(update={"comments": comments})


def _apply_known_changes(batch: Batch, plan: Plan) -> tuple[set[int], set[str]]:
    """What dev.to changed about known comments (SPEC §15.2), each record re-read under a hold of
    the lock of its own. Returns the articles whose change signal must not be recorded: an edit
    that met an attempt in flight for the old text waits (that outcome is saved for the old text),
    and the next scan must fetch the thread again to see it; and the comments whose edit goes to
    the model."""
    held: set[int] = set()
    judged_ids: set[str] = set()
    # The marks as they are now, not as planned: read once (an index read grows with the account).
    # A mark made after this read meets the edit as a mark made after planning meets any comment.
    index = batch.store.load_index() if plan.edits else None
    for cid in sorted({*plan.edits, *plan.gone, *plan.restored, *plan.reply_nodes}):
        # One record per hold, as _create_discovered: 50 deleted comments of one thread must not
        # keep every other run waiting for 50 writes (bench/run.py, lock waits during a batch).
        with batch.store.pipeline_lock():
            _apply_known_change(batch, plan, cid, index, held, judged_ids)
    return held, judged_ids


def _apply_known_change(
    batch: Batch, plan: Plan, cid: str, index: SeenFile | None, held: set[int], judged_ids: set[str]
) -> None:
    store, result = batch.store, batch.result
    record = store.load_record(cid)
    if record is None:
        return
    changed = record
    if cid in plan.restored and cid not in plan.gone:
        changed = changed.model_copy(update={"gone": None})
    if cid in plan.reply_nodes:
        changed = changed.model_copy(update={"author_replies": plan.reply_nodes[cid]})
    edit = plan.edits.get(cid)
    if edit is not None and edit.text != changed.comment.text:
        if changed.attempts and changed.attempts[-1].outcome is None:
            held.add(edit.article_id)
        else:
            entry = index.comments.get(cid) if index is not None else None
            judged = changed.gone is None and not answered_or_marked(
                entry, plan.latest_replies.get(cid)
            )
            changed = records.apply_edit(changed, edit.text, edit.prompt, judged=judged)
            result.edited.append(cid)
            batch.emit("comment.edited", comment=cid)
            if judged:
                judged_ids.add(cid)
    if cid in plan.gone:
        kind, why = plan.gone[cid]
        changed = records.mark_gone(changed, kind, why)
        if changed.gone is not record.gone:
            result.gone.append(cid)
            batch.emit(f"comment.{kind}", comment=cid)
    if changed is not record:
        store.save_record(changed)
