"""SPEC §7 steps 2–5: the part that runs under the pipeline lock.

For each planned comment: re-read → :func:`decide` → no call (repaired / skipped / interrupted /
deferred / exhausted), or reserve durably → one model call → save the outcome durably. A model
call is only ever made for an attempt that is already on disk, so no crash, kill or concurrent
run can buy a fourth call.

An agent's claim (SPEC §14) is the one reservation that may be in flight while we hold the lock:
inside its lease it is deferred, after it closed like any orphan. With provider agent nothing is
called here at all: what would be called is counted as waiting for the agent (``for_agent``).
The helpers the agent's claim and submit share (:mod:`watcher.pipeline.agent`) are public here:
:func:`hold_pipeline`, :func:`reconcile_index`, :func:`reread`, :func:`no_call`,
:func:`state_stop`, :func:`save_index`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Literal

from watcher import inbox, seen
from watcher.config import Paths
from watcher.durable import quarantined_names, sweep_stale_temps
from watcher.errors import CorruptState, Interrupted, SaveConflict, SaveFailed, StateError
from watcher.inbox import Fingerprint
from watcher.locks import pipeline_lock
from watcher.models import AttemptError, InboxRecord, SeenComment, SeenFile
from watcher.pipeline import provider_state
from watcher.pipeline.batch import Batch, SignalDuringCall
from watcher.pipeline.gate import GO, TRANSIENT_KINDS, TRANSIENT_STREAK, Gate, stop_for, stops
from watcher.pipeline.plan import Plan, Planned
from watcher.results import Command, ItemResult, ItemVerdict, Outcome

# What to do with one comment under the lock: make the call, or the outcome it gets instead.
Decision = Literal["call", "skipped", "interrupted", "deferred", "exhausted"]


def decide(command: Command, record: InboxRecord, planned: Fingerprint, *, now: datetime,
           seen_attempts: int = 0) -> Decision:
    """What to do with a comment now that we hold the lock. Pure; the order is SPEC §7 step 4.

    ``now`` judges an agent's lease (SPEC §14). ``seen_attempts`` is seen.json's count: the
    attempts that count are never lower than it, so an inbox file restored from an older copy
    cannot reopen a spent budget (SPEC §4.1, §13.5). ``claim`` picks like scan and recheck together."""
    if record.verdict is not None:
        return "skipped"
    if record.attempts and record.attempts[-1].outcome is None:
        if inbox.lease_active(record.attempts[-1], now):
            # An agent claimed it and its lease runs: in flight elsewhere, whatever lock we hold.
            return "deferred"
        # We hold the pipeline lock, so no call can be in flight (and no lease runs): its process died.
        return "interrupted"
    if inbox.fingerprint(record) != planned:
        return "deferred"
    if max(len(record.attempts), seen_attempts) >= inbox.cap_of(record):
        return "exhausted"
    if not record.attempts and (command == "recheck" or record.baseline or record.replied_at is not None):
        # Never attempted: the first attempt is scan's; a baseline or answered comment gets none.
        return "skipped"
    return "call"


def execute(batch: Batch, plan: Plan, base: SeenFile, gate: Gate) -> None:
    """Steps 2–5 of SPEC §7."""
    paths = batch.settings.paths
    with hold_pipeline(paths):
        _create_discovered(batch, plan.discovered)
        _update_uncalled(batch, plan)
        mine = reconcile_index(batch, base)
        mine = _record_articles(mine, plan)
        counted = {cid: entry.attempts for cid, entry in mine.comments.items()}
        try:
            if gate.close_breaker:
                provider_state.close_breaker(batch.settings)
            _process(batch, plan.items, gate, counted)
        finally:
            save_index(batch, base, mine, plan.replies)


@contextmanager
def hold_pipeline(paths: Paths) -> Iterator[None]:
    """The pipeline lock (SPEC §7 step 2), with the temp files of runs killed mid-write swept.

    ``pipeline_lock`` is looked up here at call time: the fault rig's kill points wrap it."""
    with pipeline_lock(paths):
        for directory in (paths.inbox, paths.root, paths.signals_dir):
            sweep_stale_temps(directory)  # left by runs killed mid-write; see durable.py
        yield


def reconcile_index(batch: Batch, base: SeenFile) -> SeenFile:
    """Under the lock: the index brought up to the inbox files; repairs are reported (§4.2)."""
    mine, changed = seen.reconcile(batch.settings.paths, base)
    batch.result.repaired = sorted(cid for cid in changed if cid in base.comments)
    for cid in batch.result.repaired:
        batch.emit("state.repaired", comment=cid)
    return mine


def save_index(batch: Batch, base: SeenFile, mine: SeenFile, replies: Mapping[str, str],
               touched: Iterable[str] = ()) -> None:
    """Save seen.json last, reconciled for every comment the run reached (and ``touched``)."""
    # The index is saved last: if we die before this, the inbox files already hold the truth and
    # the next command repairs the index from them (SPEC §4.2). A failed save fails the run
    # (exit 5) but keeps its summary: the calls were made and the user must see them.
    paths = batch.settings.paths
    try:
        ids = dict.fromkeys([*(i.id for i in batch.result.items), *touched])
        mine, _ = seen.reconcile(paths, mine, list(ids))
        seen.save(paths, base, mine)
        # The author's replies on dev.to close the loop: those comments leave the inbox (§13.3).
        batch.result.replied = seen.note_author_replies(paths, replies)
    except StateError as exc:
        batch.fail(exc)


def _record_articles(index: SeenFile, plan: Plan) -> SeenFile:
    for article in plan.articles:
        known = index.articles.get(str(article.id))
        # Both halves of the change signal (SPEC §13.3): comments_count alone misses a new comment
        # that a deletion cancelled out; last_comment_at moves on every comment create and delete.
        signal = (article.comments_count, article.title, article.last_comment_at)
        if known is None or (known.comments_count, known.title, known.last_comment_at) != signal:
            index = seen.record_article(index, article.id, title=article.title, url=article.url,
                                        comments_count=article.comments_count,
                                        last_comment_at=article.last_comment_at)
    return index


def _create_discovered(batch: Batch, plan: Sequence[Planned]) -> None:
    """Inbox files for comments this run discovered: prompt rendered once, cached, no attempts."""
    from watcher import prompts  # the template is read only by commands that create records

    paths = batch.settings.paths
    known: dict[str, SeenComment] | None = None
    for item in plan:
        if item.comment is not None and not paths.inbox_file(item.id).exists():
            known = seen.load(paths).comments if known is None else known  # re-read under the lock
            if _history_lost(paths, item.id, known.get(item.id)):
                continue  # reread reports it as skipped: its inbox file is gone
            prompt = prompts.render(item.comment, parent_text=item.parent_text)
            record = inbox.new_record(item.comment, prompt)
            if item.baseline or item.replied_at:
                record = record.model_copy(update={"baseline": item.baseline, "replied_at": item.replied_at})
            inbox.save(paths, record)
    batch.result.baseline = sum(1 for item in plan if item.baseline and not item.replied_at)
    batch.result.answered = sum(1 for item in plan if item.replied_at)


def _update_uncalled(batch: Batch, plan: Plan) -> None:
    """Under the lock, for comments that have had no attempt: the author answered them meanwhile
    (never to be called), or `scan --since` queued a baseline one. Re-read first: a comment that
    got an attempt since planning is left as it is."""
    paths = batch.settings.paths
    changes: dict[str, dict[str, object]] = {cid: {"replied_at": when} for cid, when in plan.answered.items()}
    for cid in plan.requeued:
        changes.setdefault(cid, {})["baseline"] = False
    for cid, update in changes.items():
        record = inbox.load(paths, cid)
        if record is None or record.attempts or record.verdict is not None:
            continue
        inbox.save(paths, record.model_copy(update=update))
    batch.result.answered += len(plan.answered)


def _history_lost(paths: Paths, cid: str, entry: SeenComment | None) -> bool:
    """A comment with no inbox file that had one: the index counted attempts, or a copy sits in
    quarantine/. Its attempts and any saved verdict live only in that copy now; a fresh record
    would start the 3-call budget over and re-request a saved verdict (SPEC §1), so none is
    made until the user restores the file."""
    if entry is not None and (entry.attempts > 0 or entry.status != "pending"):
        return True
    return bool(quarantined_names(paths.quarantine, f"inbox-{cid}.json"))


def _process(batch: Batch, plan: Sequence[Planned], gate: Gate, counted: Mapping[str, int]) -> None:
    result = batch.result
    # Transient failures in a row (SPEC §13.1). A half-open attempt continues the outage that
    # opened the breaker: one more transient failure is the second in a row.
    streak = TRANSIENT_STREAK - 1 if gate.verdict == "half_open" else 0
    for position, item in enumerate(plan):
        if batch.interrupted is not None and not batch.stopped:
            batch.stop("interrupted", Interrupted(batch.interrupted))
        if batch.stopped:
            batch.add(ItemResult(item.id, "not_started"))
            continue
        if result.calls >= batch.run.limit:
            result.remaining = len(plan) - position
            break
        record = reread(batch, item.id)
        if record is None:
            continue
        action = decide(batch.run.command, record, item.fingerprint, now=batch.now(),
                        seen_attempts=counted.get(item.id, 0))
        if action != "call":
            no_call(batch, record, action)
            continue
        if not batch.calls_model:
            result.for_agent += 1  # provider agent: it stays pending or failed until an agent claims it
            continue
        if gate.error is not None:
            batch.stop(gate.stop, gate.error)
            batch.add(ItemResult(item.id, "not_started", message=str(gate.error)))
            continue
        if gate.verdict == "half_open":
            # The one real attempt this hour where no probe can tell; recorded before the call.
            provider_state.mark_half_open(batch.settings)
        error = _attempt(batch, record, streak)
        streak = streak + 1 if error is not None and error.kind in TRANSIENT_KINDS else 0
        if gate.verdict == "half_open" and not batch.stopped:
            provider_state.close_breaker(batch.settings)  # it answered: the setup works again
            gate = GO
    if batch.interrupted is not None and not batch.stopped:
        batch.stop("interrupted", Interrupted(batch.interrupted))
    if gate.error is not None and not batch.stopped:
        # Nothing needed a call this time, but the run still says it may not call (SPEC §7.2,
        # §13.1): a cron job must not mistake "no calls allowed" for "all caught up".
        batch.stop(gate.stop, gate.error)


def reread(batch: Batch, cid: str) -> InboxRecord | None:
    """The comment's inbox file as it is now (step 4.1); a corrupt or missing one is reported skipped."""
    paths = batch.settings.paths
    try:
        record = inbox.load(paths, cid)
    except StateError as exc:
        if isinstance(exc, CorruptState):
            batch.emit("state.quarantined", comment=cid)
        batch.fail(exc)
        batch.add(ItemResult(cid, "skipped", kind=exc.kind, message=str(exc)))
        return None
    if record is None:
        batch.add(ItemResult(cid, "skipped", message=f"its inbox file is gone (see {paths.quarantine}); "
                             "restore it to go on — a new record would restart its 3-attempt budget"))
    return record


def no_call(batch: Batch, record: InboxRecord, action: Decision) -> None:
    """Record what a comment got instead of a call (steps 4.2–4.5): its outcome, signal and item."""
    cid, n = record.comment.id, len(record.attempts)
    if action == "skipped" and record.verdict is not None:
        outcome: Outcome = "repaired" if cid in batch.result.repaired else "skipped"
        batch.add(ItemResult(cid, outcome, message="verdict already saved", attempts=n))
    elif action == "skipped" and record.replied_at is not None:
        batch.add(ItemResult(cid, "skipped", message=f"you replied on dev.to at {record.replied_at}: no call needed",
                             attempts=n))
    elif action == "skipped" and record.baseline:
        batch.add(ItemResult(cid, "skipped", message="baseline (older than the first scan's backlog window): "
                             "`watcher scan --since DATE` queues it", attempts=n))
    elif action == "skipped":  # recheck asked for a comment that has never been tried
        batch.add(ItemResult(cid, "skipped", message="never attempted: `watcher scan` makes the first attempt",
                             attempts=n))
    elif action == "interrupted":
        try:
            inbox.save(batch.settings.paths, inbox.mark_interrupted(record))
        except SaveFailed as exc:
            state_stop(batch, cid, "save_failed", exc)
            return
        lease = record.attempts[-1].lease_until
        why = (f"was claimed by an agent (lease until {lease}) and never submitted" if lease
               else "was left reserved by a process that died")
        batch.emit("attempt.interrupted", comment=cid)
        batch.add(ItemResult(cid, "interrupted", kind="interrupted",
                             message=f"attempt {n} {why}; no call this run", attempts=n))
    elif action == "deferred" and (lease := inbox.open_lease(record)) is not None:
        batch.emit("item.deferred", comment=cid)
        batch.add(ItemResult(cid, "deferred", message=f"attempt {n} is claimed by an agent until {lease}: "
                             "its verdict comes by submit; after that time the next run closes it", attempts=n))
    elif action == "deferred":
        batch.emit("item.deferred", comment=cid)
        batch.add(ItemResult(cid, "deferred", message="changed by another command while this one waited; "
                                                      "run again to act on the new state", attempts=n))
    else:
        batch.emit("item.exhausted", comment=cid)
        batch.add(ItemResult(cid, "exhausted", message=f"all {inbox.cap_of(record)} attempts spent; "
                             f"`watcher grant {cid}` gives it another try", attempts=n))


def _attempt(batch: Batch, record: InboxRecord, streak: int) -> AttemptError | None:
    """Reserve, call once, save the outcome. Returns the attempt's error, if any."""
    cid, paths, run = record.comment.id, batch.settings.paths, batch.run
    provider = batch.provider()
    reserved = inbox.reserve(record, command=run.command, entrypoint=run.entrypoint,
                             provider=provider.name, model=provider.model)
    try:
        inbox.save(paths, reserved)
    except SaveFailed as exc:
        # Not reserved on disk means not paid for: no call.
        state_stop(batch, cid, "reserve_failed", exc)
        return None
    written = inbox.stamp(paths.inbox_file(cid))  # the version this run wrote, for the compare below
    batch.result.calls += 1
    if run.hooks.on_call is not None:
        run.hooks.on_call(cid)
    try:
        with batch.in_call():
            answer = provider.complete(reserved.prompt)
    except SignalDuringCall as sig:
        _interrupted_in_call(batch, reserved, sig.signum)
        return None
    error = answer.error
    stop = None
    if error is not None and stops(error, streak + (error.kind in TRANSIENT_KINDS)):
        stop = stop_for(batch, error)  # cooldown / breaker on disk before the outcome
    try:
        current = _compare(batch, reserved, written)
        finished = inbox.finish(current, verdict=answer.verdict, error=error, raw=answer.raw,
                                usage=answer.usage, duration_ms=answer.duration_ms)
        inbox.save(paths, finished)
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
    n = len(finished.attempts)
    if answer.verdict is not None:
        batch.emit("verdict.ok", comment=cid)
        batch.add(ItemResult(cid, "verdict", attempts=n, verdict=ItemVerdict.of(answer.verdict)))
        return None
    assert error is not None
    batch.emit(f"verdict.error.{error.kind}", comment=cid)
    batch.add(ItemResult(cid, "error", kind=error.kind, message=error.message, attempts=n))
    if stop is not None:
        batch.stop(*stop)
    return error


def _compare(batch: Batch, reserved: InboxRecord, written: str | None) -> InboxRecord:
    """The file as it is now, if the attempt this run reserved is still its open last attempt.

    Every durable write replaces the file with a new inode, so a file whose (inode, mtime, size)
    is still what this run wrote is this run's reservation: one lstat instead of a read."""
    cid, paths = reserved.comment.id, batch.settings.paths
    if written is not None and inbox.stamp(paths.inbox_file(cid)) == written:
        return reserved
    current = inbox.load(paths, cid)
    mine = reserved.attempts[-1]
    if current is None or not inbox.still_reserved(current, mine):
        raise SaveConflict(
            f"{paths.inbox_file(cid)}: attempt {mine.n}, reserved by this run, is no longer the file's open last "
            "attempt — another process wrote it without the pipeline lock (was locks/pipeline.lock deleted, or is "
            "inbox/ shared with another data dir?). Nothing was written; this call's answer is lost and its "
            "attempt stays counted")
    return current


def _interrupted_in_call(batch: Batch, reserved: InboxRecord, signum: int) -> None:
    """Ctrl-C or SIGTERM while the request was out: the request may have been sent, so the attempt
    stays counted; it is closed as interrupted at once rather than left for the next run."""
    cid = reserved.comment.id
    error = Interrupted(signum)
    message = f"attempt {reserved.attempts[-1].n} was stopped by the person during the call: {error}"
    try:
        inbox.save(batch.settings.paths, inbox.mark_interrupted(reserved, message=message))
    except SaveFailed as exc:
        state_stop(batch, cid, "save_failed", exc)
        return
    batch.emit("attempt.interrupted", comment=cid)
    batch.add(ItemResult(cid, "interrupted", kind="interrupted", message=message, attempts=len(reserved.attempts)))
    batch.stop("interrupted", error)


def state_stop(batch: Batch, cid: str, outcome: Literal["reserve_failed", "save_failed"],
                exc: StateError) -> None:
    # A disk that cannot hold our state must not keep buying calls: stop the batch (exit 5).
    batch.stop(outcome, exc, comment=cid)
    batch.add(ItemResult(cid, outcome, kind="save_failed", message=str(exc)))
