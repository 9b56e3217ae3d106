"""SPEC §7 steps 2–5: the decisions and writes, each under the pipeline lock (§15.1).

For each planned comment, under the lock: re-read → :func:`watcher.state.records.decide` → no call
(repaired / skipped / interrupted / deferred / exhausted), or take its call lock and reserve
durably. Then, without the lock, one model call (:mod:`watcher.pipeline.calls`, up to
``--parallel`` at once); then, under the lock again, the outcome's compare-and-swap. A model call
is only ever made for an attempt that is already on disk, and its call lock marks it in flight
until its outcome is, so no crash, kill or concurrent run can buy a fourth call.

An agent's claim (SPEC §14) is the one reservation that may be in flight while we hold the lock:
inside its lease it is deferred, after it closed like any orphan. With provider agent nothing is
called here at all: what would be called is counted as waiting for the agent (``for_agent``).
The helpers the agent's claim and submit share (:mod:`watcher.pipeline.agent`) are public here:
:func:`reconcile_index`, :func:`reread`, :func:`no_call`, :func:`state_stop`, :func:`save_index`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from watcher.commands.results import ItemOutcome, ItemResult, ItemVerdict
from watcher.errors import (
    Cancelled,
    CorruptState,
    Interrupted,
    LockBusy,
    SaveConflict,
    SaveFailed,
    StateError,
)
from watcher.models import AttemptError, InboxRecord, SeenComment, SeenFile
from watcher.pipeline import provider_state
from watcher.pipeline.batch import Batch, SignalDuringCall
from watcher.pipeline.calls import Calls, Flight
from watcher.pipeline.gate import GO, TRANSIENT_KINDS, TRANSIENT_STREAK, Gate, after_answer
from watcher.pipeline.plan import Plan, Planned, answered_or_marked
from watcher.source import SourceArticle
from watcher.state import records, seen
from watcher.state.records import Decision, decide


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
    if gate.close_breaker or gate.pending is not None:
        with store.pipeline_lock():  # a hold only when there is a write to make
            if gate.pending is not None:
                # A 429's cooldown the run that met it could not write (SPEC §15.5): written before any
                # call; a failure here is exit 5, and the gate is closed anyway.
                provider_state.write_pending(store, gate.pending)
            if gate.close_breaker:
                provider_state.close_breaker(store)
    _update_uncalled(batch, plan)
    held, judged = _apply_known_changes(batch, plan)
    batch.result.answered += len(plan.answered)
    # Without the lock: reading every changed record would make the hold grow with the account
    # (bench/run.py figure 8). Each comment is re-read under the lock before anything is decided,
    # and the index's attempt counts only ever grow, so an index a moment old is safe for decide.
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
        _process(batch, plan.items, gate, counted)
    finally:
        try:
            with store.pipeline_lock():
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
# waiting behind it must not wait for all of them (bench/run.py figure 7: the longest hold).
CREATE_PER_HOLD = 1


def _create_discovered(batch: Batch, plan: Sequence[Planned]) -> None:
    """Inbox files for comments this run discovered: prompt rendered once, cached, no attempts.

    The prompts are rendered before the lock; each record is written under it, if it is still
    missing and its history was not lost."""
    from watcher.providers import (
        prompts,  # the template is read only by commands that create records
    )

    store = batch.store
    fresh = []
    for item in plan:
        if item.comment is None or store.has_record(item.id):
            continue
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
        fresh.append(record)
    known: dict[str, SeenComment] | None = None
    for start in range(0, len(fresh), CREATE_PER_HOLD):
        with store.pipeline_lock():
            known = store.load_index().comments if known is None else known  # read under the lock
            for record in fresh[start : start + CREATE_PER_HOLD]:
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


def _update_uncalled(batch: Batch, plan: Plan) -> None:
    """Under the lock, one hold each, for comments that have had no attempt: the author answered them meanwhile
    (never to be called), or `scan --since` queued a baseline one. Re-read first: a comment that
    got an attempt since planning is left as it is."""
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
    the lock of its own. Returns the articles whose change signal must not be recorded: an edit that met an
    attempt in flight for the old text waits (that outcome is saved for the old text), and the next
    scan must fetch the thread again to see it; and the comments whose edit goes to the model."""
    held: set[int] = set()
    judged_ids: set[str] = set()
    # The marks as they are now, not as planned: read once (an index read grows with the account).
    # A mark made after this read meets the edit as a mark made after planning meets any comment.
    index = batch.store.load_index() if plan.edits else None
    for cid in sorted({*plan.edits, *plan.gone, *plan.restored, *plan.reply_nodes}):
        # One record per hold, as _create_discovered: 50 deleted comments of one thread must not
        # keep every other run waiting for 50 writes (bench/run.py figure 8).
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


def _process(batch: Batch, plan: Sequence[Planned], gate: Gate, counted: Mapping[str, int]) -> None:
    """Decide and reserve comment by comment, with up to ``run.parallel`` calls out at once (§15.1).

    A half-open attempt (§13.1) goes out alone: nothing else is sent until it has answered."""
    result = batch.result
    # Transient failures in a row, counted in the order the answers arrive (SPEC §13.1). A
    # half-open attempt continues the outage that opened the breaker: one more transient
    # failure is the second in a row.
    run = _Progress(gate, TRANSIENT_STREAK - 1 if gate.mode == "half_open" else 0)
    # Nothing can abort a call from outside when no ``aborted`` hook is set (the MCP server sets
    # one): one call at a time is then made on this thread (watcher/pipeline/calls.py).
    inline = batch.provider if batch.run.hooks.aborted is None else None
    calls = Calls(
        1 if gate.mode == "half_open" else batch.run.parallel,
        batch.new_provider,
        inline=inline,
        calling=batch.waiting_for_calls,
    )
    if plan and batch.calls_model and gate.error is None:
        # Built before any lock: the first build imports httpx and makes a client (~0.1 s of CPU,
        # seconds on a starved machine), and a reservation names the provider (bench/run.py figure 8).
        batch.provider()
    begun = 0  # the items met so far; a signal leaves the rest not_started
    unreached = 0  # items a stop left not_started, which count toward the limit like calls
    try:
        for position, item in enumerate(plan):
            while calls.in_flight and (
                len(calls.in_flight) >= calls.capacity or run.gate.mode == "half_open"
            ):
                _collect(batch, calls, run)
            begun = position + 1
            _front_end_stop(batch)
            if batch.interrupted is not None and not batch.stopped:
                batch.stop("interrupted", Interrupted(batch.interrupted))
            if batch.stopped:
                if result.calls + unreached >= batch.run.limit:
                    # Beyond the limit the run would not have called them anyway: counted, not
                    # listed (SPEC §7.1) — a stop at the first of 27 planned is 5 rows, not 27.
                    result.remaining = len(plan) - position
                    break
                unreached += 1
                batch.add(ItemResult(item.id, "not_started"))
                continue
            if result.calls >= batch.run.limit:
                result.remaining = len(plan) - position
                break
            flight = _begin(batch, item, run.gate, counted)
            if flight is not None:
                calls.start(flight)
            elif batch.stopped and result.items and result.items[-1].id == item.id:
                unreached += result.items[-1].outcome == "not_started"  # it stopped at this one
            _note_out(batch, calls)
        begun = len(plan)
        while calls.in_flight:
            _collect(batch, calls, run)
    except SignalDuringCall as sig:
        _interrupted_in_flight(batch, calls, sig.signum)
        for item in plan[begun:]:
            batch.add(ItemResult(item.id, "not_started"))
    finally:
        calls.close()
    if batch.interrupted is not None and not batch.stopped:
        batch.stop("interrupted", Interrupted(batch.interrupted))
    if run.gate.error is not None and not batch.stopped:
        # Nothing needed a call this time, but the run still says it may not call (SPEC §7.2,
        # §13.1): a cron job must not mistake "no calls allowed" for "all caught up".
        batch.stop(run.gate.stop, run.gate.error)


def _front_end_stop(batch: Batch) -> None:
    """The MCP client cancelled the call (no further call; SPEC §15.4), or the server is going
    (as a signal would: every call out is closed as interrupted)."""
    hooks = batch.run.hooks
    if hooks.aborted is not None and (signum := hooks.aborted()) is not None:
        batch.interrupted = batch.interrupted or signum
    if hooks.cancelled is not None and not batch.stopped and hooks.cancelled():
        batch.stop("cancelled", Cancelled())


class _Progress:
    """What the answers change while a batch runs: the gate (a half-open attempt that answered
    closes the breaker) and the count of transient failures in a row."""

    def __init__(self, gate: Gate, streak: int) -> None:
        self.gate = gate
        self.streak = streak


def _begin(batch: Batch, item: Planned, gate: Gate, counted: Mapping[str, int]) -> Flight | None:
    """Under the lock: re-read, decide, and for a call take the call lock and reserve durably
    (SPEC §7 steps 4.1–4.6). Returns the reserved attempt to send, else ``None``."""
    store = batch.store
    try:
        held = store.pipeline_lock()
        held.__enter__()
    except LockBusy as exc:
        batch.stop(exc.kind, exc, comment=item.id)  # lock_busy, or interrupted while waiting
        batch.add(ItemResult(item.id, "not_started", message=str(exc)))
        return None
    try:
        return _decide_and_reserve(batch, item, gate, counted)
    finally:
        held.__exit__(None, None, None)


def _decide_and_reserve(
    batch: Batch, item: Planned, gate: Gate, counted: Mapping[str, int]
) -> Flight | None:
    store, result = batch.store, batch.result
    record = reread(batch, item.id)
    if record is None:
        return None
    live = live_call(batch, record)
    action = decide(
        batch.run.command,
        record,
        item.fingerprint,
        now=batch.now(),
        seen_attempts=counted.get(item.id, 0),
        call_in_flight=live,
    )
    if action != "call":
        no_call(batch, record, action, live=live)
        return None
    if not batch.calls_model:
        result.for_agent += 1  # provider agent: it stays pending or failed until an agent claims it
        return None
    if gate.error is not None:
        batch.stop(gate.stop, gate.error)
        batch.add(ItemResult(item.id, "not_started", message=str(gate.error)))
        return None
    cid = record.comment.id
    call_lock = store.call_lock(cid)
    if (
        call_lock is None
    ):  # another run is calling for it right now (it took the lock after our read)
        no_call(batch, record, "deferred", live=True)
        return None
    if gate.mode == "half_open":
        # The one real attempt this hour where no probe can tell; recorded before the call.
        provider_state.mark_half_open(store, now=batch.now())
    provider = batch.provider()
    reserved = records.reserve(
        record,
        command=batch.run.command,
        entrypoint=batch.run.entrypoint,
        provider=provider.name,
        model=provider.model,
    )
    try:
        reservation = store.write_reservation(reserved)
    except SaveFailed as exc:
        # Not reserved on disk means not paid for: no call.
        call_lock.release()
        state_stop(batch, cid, "reserve_failed", exc)
        return None
    result.calls += 1
    if batch.run.hooks.on_call is not None:
        batch.run.hooks.on_call(cid)
    return Flight(reservation, call_lock, half_open=gate.mode == "half_open")


def live_call(batch: Batch, record: InboxRecord) -> bool:
    """Whether the record's open reservation (no agent lease) is a call in flight elsewhere."""
    last = record.attempts[-1] if record.attempts else None
    if last is None or last.outcome is not None or last.lease_until is not None:
        return False
    return batch.store.call_in_flight(record.comment.id)


def _collect(batch: Batch, calls: Calls, run: _Progress) -> None:
    """Wait for the next answer and write its outcome under the lock (steps 4.8–4.10)."""
    with batch.waiting_for_calls():
        flight = calls.next_done(batch.run.hooks.aborted)
    error = _finish(batch, flight, run)
    if run.gate.mode == "go":
        calls.capacity = (
            batch.run.parallel
        )  # a half-open attempt that answered: the setup works again
    run.streak = run.streak + 1 if error is not None and error.kind in TRANSIENT_KINDS else 0
    _note_out(batch, calls)


def _note_out(batch: Batch, calls: Calls) -> None:
    """The calls already sent when the batch stopped: they finish and are saved (SPEC §15.1)."""
    if batch.stopped and not batch.result.already_out:
        batch.result.already_out = len(calls.in_flight)


def _finish(batch: Batch, flight: Flight, run: _Progress) -> AttemptError | None:
    """The outcome of one answered call, written by compare-and-swap (SPEC §13.5). Returns its error."""
    store, cid = batch.store, flight.comment_id
    answer = flight.answer
    assert answer is not None
    error = answer.error
    try:
        with store.pipeline_lock():
            # On disk before the outcome: what the next run must honour survives a failed save.
            stop, unsaved, closed = after_answer(
                batch, error, streak=run.streak, half_open=flight.half_open
            )
            if closed:
                run.gate = GO  # the half-open attempt answered: the setup works again
            try:
                finished = store.write_outcome(
                    flight.reservation,
                    lambda current: records.finish(
                        current,
                        verdict=answer.verdict,
                        error=error,
                        raw=answer.raw,
                        usage=answer.usage,
                        duration_ms=answer.duration_ms,
                    ),
                )
            except SaveConflict as exc:
                # Someone wrote this file without the lock: writing our copy back would erase their
                # attempts (5 calls for one comment, once). Write nothing; stop loudly.
                batch.stop("save_conflict", exc, comment=cid)
                batch.add(ItemResult(cid, "save_conflict", kind="save_conflict", message=str(exc)))
                return error
            except (SaveFailed, CorruptState) as exc:
                # The attempt stays reserved and counted; whoever holds the lock next records it as
                # interrupted. The answer itself is lost (SPEC §11).
                state_stop(batch, cid, "save_failed", exc)
                return error
            finally:
                flight.call_lock.release()  # after the outcome is durable (or will never be)
    except LockBusy as exc:
        flight.call_lock.release()
        state_stop(batch, cid, "save_failed", exc)
        return error
    if unsaved is not None:
        # What the next run must honour is not on disk: no further call this run (exit 5). The
        # outcome just written keeps the 429 and its Retry-After, from which the next run's gate
        # writes the cooldown before any call (provider_state.pending_cooldown).
        batch.stop("save_failed", unsaved, comment=cid)
    n = len(finished.attempts)
    if answer.verdict is not None:
        batch.emit("verdict.ok", comment=cid)
        batch.add(ItemResult(cid, "verdict", attempts=n, verdict=ItemVerdict.of(answer.verdict)))
        return None
    assert error is not None
    batch.emit(f"verdict.error.{error.kind}", comment=cid)
    batch.add(ItemResult(cid, "error", kind=error.kind, message=error.message, attempts=n))
    if records.state_of(finished) == "exhausted":
        batch.result.spent.append(cid)  # only `watcher grant` tries it again
    if stop is not None:
        batch.stop(*stop)
    return error


def _interrupted_in_flight(batch: Batch, calls: Calls, signum: int) -> None:
    """Ctrl-C or SIGTERM while calls were out: each request may have been sent, so each attempt
    stays counted; they are closed as interrupted at once rather than left for the next run
    (SPEC §13.6). An answer that had already arrived is saved as it is."""
    error = Interrupted(signum)
    batch.interrupted = batch.interrupted or signum
    for flight in calls.in_flight:
        calls.forget(flight)
        if flight.answer is not None:
            _finish(batch, flight, _Progress(GO, 0))
            continue
        cid, n = flight.comment_id, len(flight.record.attempts)
        message = f"attempt {n} was stopped by the person during the call: {error}"
        try:
            with batch.store.pipeline_lock():
                try:
                    batch.store.write_outcome(
                        flight.reservation,
                        functools.partial(records.mark_interrupted, message=message),
                    )
                finally:
                    flight.call_lock.release()
        except (StateError, LockBusy) as exc:
            state_stop(batch, cid, "save_failed", exc)
            continue
        batch.emit("attempt.interrupted", comment=cid)
        batch.add(ItemResult(cid, "interrupted", kind="interrupted", message=message, attempts=n))
    batch.stop("interrupted", error)


def reread(batch: Batch, cid: str) -> InboxRecord | None:
    """The comment's inbox file as it is now (step 4.1); a corrupt or missing one is reported skipped."""
    store = batch.store
    try:
        record = store.load_record(cid)
    except StateError as exc:
        if isinstance(exc, CorruptState):
            batch.emit("state.quarantined", comment=cid)
        batch.fail(exc)
        batch.add(ItemResult(cid, "skipped", kind=exc.kind, message=str(exc)))
        return None
    if record is None:
        batch.add(
            ItemResult(
                cid,
                "skipped",
                message=f"its inbox file is gone (see {store.paths.quarantine}); "
                "restore it to go on — a new record would restart its 3-attempt budget",
            )
        )
    return record


def no_call(batch: Batch, record: InboxRecord, action: Decision, *, live: bool = False) -> None:
    """Record what a comment got instead of a call (steps 4.2–4.5): its outcome, signal and item."""
    cid, n = record.comment.id, len(record.attempts)
    if action == "skipped" and record.gone is not None:
        batch.add(
            ItemResult(
                cid,
                "skipped",
                message=f"{record.gone.kind} on dev.to ({record.gone.why}): never called again",
                attempts=n,
            )
        )
    elif action == "skipped" and records.edit_on_hold(record):
        batch.add(
            ItemResult(
                cid,
                "skipped",
                message="edited after you replied or marked it: recorded, not judged again",
                attempts=n,
            )
        )
    elif action == "skipped" and record.verdict is not None:
        outcome: ItemOutcome = "repaired" if cid in batch.result.repaired else "skipped"
        batch.add(ItemResult(cid, outcome, message="verdict already saved", attempts=n))
    elif action == "skipped" and record.replied_at is not None:
        batch.add(
            ItemResult(
                cid,
                "skipped",
                message=f"you replied on dev.to at {record.replied_at}: no call needed",
                attempts=n,
            )
        )
    elif action == "skipped" and record.baseline:
        batch.add(
            ItemResult(
                cid,
                "skipped",
                message="baseline (older than the first scan's backlog window): "
                "`watcher scan --since DATE` queues it",
                attempts=n,
            )
        )
    elif action == "skipped":  # recheck asked for a comment that has never been tried
        batch.add(
            ItemResult(
                cid,
                "skipped",
                message="never attempted: `watcher scan` makes the first attempt",
                attempts=n,
            )
        )
    elif action == "interrupted":
        try:
            batch.store.save_record(records.mark_interrupted(record))
        except SaveFailed as exc:
            state_stop(batch, cid, "save_failed", exc)
            return
        lease = record.attempts[-1].lease_until
        why = (
            f"was claimed by an agent (lease until {lease}) and never submitted"
            if lease
            else "was left reserved by a process that died"
        )
        batch.emit("attempt.interrupted", comment=cid)
        batch.add(
            ItemResult(
                cid,
                "interrupted",
                kind="interrupted",
                message=f"attempt {n} {why}; no call this run",
                attempts=n,
            )
        )
    elif action == "deferred" and (lease := records.open_lease(record)) is not None:
        batch.emit("item.deferred", comment=cid)
        batch.add(
            ItemResult(
                cid,
                "deferred",
                message=f"attempt {n} is claimed by an agent until {lease}: "
                "its verdict comes by submit; after that time the next run closes it",
                attempts=n,
            )
        )
    elif action == "deferred" and live:
        batch.emit("item.deferred", comment=cid)
        batch.add(
            ItemResult(
                cid,
                "deferred",
                message=f"attempt {n} is in flight in pid {record.attempts[-1].pid} "
                "(another run's call): its outcome comes from that run",
                attempts=n,
            )
        )
    elif action == "deferred":
        batch.emit("item.deferred", comment=cid)
        batch.add(
            ItemResult(
                cid,
                "deferred",
                message="changed by another command while this one waited; "
                "run again to act on the new state",
                attempts=n,
            )
        )
    else:
        batch.emit("item.exhausted", comment=cid)
        batch.add(
            ItemResult(
                cid,
                "exhausted",
                message=f"all {records.cap_of(record)} attempts spent; "
                f"`watcher grant {cid}` gives it another try",
                attempts=n,
            )
        )


def state_stop(
    batch: Batch,
    cid: str,
    outcome: Literal["reserve_failed", "save_failed"],
    exc: StateError | LockBusy,
) -> None:
    # A disk that cannot hold our state must not keep buying calls: stop the batch (exit 5).
    batch.stop(outcome, exc, comment=cid)
    batch.add(ItemResult(cid, outcome, kind="save_failed", message=str(exc)))
