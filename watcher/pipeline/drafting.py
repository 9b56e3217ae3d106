"""SPEC §16.5: one reply draft for one comment, under a budget of its own and the rules of an
attempt (SPEC §7, §13.1, §15.1).

    draft(run, comment_id) -> Drafted

The order is a batch's for one comment, with ``drafts`` for ``attempts``:

1. unlocked: read the record, render the prompt (the author's earlier replies are read here), ask
   the gate (:func:`watcher.pipeline.gate.admit`: a cooldown or an open breaker refuses the draft,
   exit 3 or 2; a half-open interval lets this call be the one real call);
2. under the pipeline lock: re-read; an open draft reservation whose call lock is free is an
   orphan — closed as ``interrupted``, still counted; the cap (3 drafts, ever); take the comment's
   call lock (the same one as its verdict calls: one call per comment in flight, whichever); the
   month's token check (SPEC §16.4, :mod:`watcher.pipeline.budget`: a draft is a provider call);
   reserve draft n+1 durably — no reservation on disk, no call;
3. unlocked: the one call (the offline provider makes none: a template from the verdict's hint);
4. under the lock: the provider state the answer leaves (:func:`watcher.pipeline.gate.after_answer`:
   a stop kind opens the breaker, a 429 sets the cooldown), written before the draft's outcome; then
   the outcome by compare-and-swap, then its tokens settled in the month's tally; the call lock
   let go once it is durable.

The verdict's attempts, grants and state are never read for the budget nor written here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from watcher.errors import (
    Interrupted,
    LockBusy,
    ProviderStop,
    SaveConflict,
    StateError,
    UsageError,
    WatcherError,
)
from watcher.models import InboxRecord, Prompt, Usage
from watcher.pipeline import budget, provider_state
from watcher.pipeline import gate as gates
from watcher.pipeline.batch import Batch, Run, SignalDuringCall, caught_signals
from watcher.pipeline.in_flight import draft_in_flight, draft_token
from watcher.providers import drafts as draft_calls
from watcher.providers import prompts
from watcher.providers.base import TextResult
from watcher.state import drafts
from watcher.state.drafts_model import Draft, DraftError
from watcher.state.tokens import draft_used, key_of, worst_case
from watcher.store import CallLock, Store
from watcher.util.timeutil import iso

__all__ = ["Drafted", "draft"]


@dataclass(frozen=True)
class Drafted:
    """What a draft run did: the record as it was left, the draft it made, an orphaned draft it
    closed first (``None``: none), and the error the run exits with though it made the draft (a
    failed call, a stop, an outcome that could not be saved; ``None``: it ended well)."""

    record: InboxRecord
    draft: Draft
    closed: Draft | None = None
    error: WatcherError | None = None


def draft(run: Run, comment_id: str, *, notice: Callable[[str], None] = lambda _m: None) -> Drafted:
    """One reply draft for ``comment_id`` (SPEC §16.5). Raises :class:`UsageError` for an unknown
    comment, a spent budget or a comment gone from dev.to; the gate's error for a cooldown or an
    open breaker; :class:`LockBusy` while a call for the comment is in flight elsewhere;
    :class:`StateError` when the reservation cannot be written (no call). Once the call is made, a
    failure comes back as :attr:`Drafted.error` beside what was saved."""
    batch = Batch(run, notice=notice)
    store = batch.store
    record = _known(batch, comment_id)
    if drafts.open_draft(record) is None and (why := drafts.refusal(record)) is not None:
        raise UsageError(why)
    offline = run.settings.provider == "offline"
    prompt = None if offline else _prompt(batch, record)
    gate = gates.GO if offline else gates.admit(batch, store.load_index())
    if gate.pending is not None:
        with store.pipeline_lock():  # a 429's cooldown never written: written first (§15.5)
            provider_state.write_pending(store, gate.pending)
    if gate.error is not None:
        raise gate.error
    try:
        with caught_signals(batch):
            return _reserve_call_finish(batch, comment_id, prompt, gate)
    finally:
        batch.close()


def _reserve_call_finish(
    batch: Batch, cid: str, prompt: Prompt | None, gate: gates.Gate
) -> Drafted:
    provider = None if prompt is None else batch.provider()  # built before any lock
    if provider is not None and not isinstance(provider, draft_calls.Drafter):
        raise UsageError(f"provider {provider.name} cannot write a free-text draft")
    name, model = (provider.name, provider.model) if provider else ("offline", batch.settings.model)
    # A draft spends the provider's tokens as an attempt does: WATCHER_MONTHLY_TOKENS (SPEC §16.4).
    counted = prompt if provider is not None and budget.spends(name) else None
    unread = (
        budget.prepare_tally(batch.store)
        if counted is not None and batch.settings.monthly_tokens
        else None
    )
    with batch.store.pipeline_lock():
        reserved, closed, call_lock = _reserve(
            batch, cid, gate, provider=name, model=model, counted=counted
        )
    with _releasing(call_lock):  # however this ends; a second release does nothing
        done = _call_and_finish(batch, reserved, closed, call_lock, prompt, gate)
    # A tally that had to be built again (or could not be written) fails the run, as a batch's.
    return done if done.error is not None or unread is None else replace(done, error=unread)


def _call_and_finish(
    batch: Batch,
    reserved: InboxRecord,
    closed: Draft | None,
    call_lock: CallLock,
    prompt: Prompt | None,
    gate: gates.Gate,
) -> Drafted:
    """The one call of the reserved draft, unlocked, then its outcome under the lock."""
    cid, mine = reserved.comment.id, reserved.drafts[-1]
    provider = None if prompt is None else batch.provider()
    try:
        with batch.waiting_for_calls():
            if batch.run.hooks.on_call is not None:
                batch.run.hooks.on_call(cid)
            answer = (
                TextResult(text=draft_calls.offline_draft(reserved))
                if provider is None or prompt is None
                else draft_calls.call_draft(provider, prompt)
            )
    except SignalDuringCall as sig:
        # The request may have been sent: the draft stays counted, closed now (SPEC §13.6).
        message = f"draft {mine.n} was stopped by the person during the call"
        with _releasing(call_lock), batch.store.pipeline_lock():
            stopped = _close(batch, cid, mine, lambda r: drafts.interrupt_draft(r, message=message))
            _settle(batch.store, cid, stopped.drafts[-1])
        raise Interrupted(sig.signum) from None
    error = _error_of(answer)
    usage = answer.usage or Usage()

    def finish(record: InboxRecord) -> InboxRecord:
        return drafts.finish_draft(
            record,
            text=answer.text,
            error=error,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            duration_ms=answer.duration_ms,
            at=iso(batch.now()),
        )

    stop, unsaved = None, None
    with _releasing(call_lock), batch.store.pipeline_lock():
        if provider is not None:  # the offline template says nothing of any provider
            # On disk before the outcome: what the next run must honour survives a failed save.
            stop, unsaved, _ = gates.after_answer(
                batch, answer.error, streak=0, half_open=gate.mode == "half_open", comment=cid
            )
        try:
            finished, failed = _close(batch, cid, mine, finish), None
            _settle(batch.store, cid, finished.drafts[-1])
        except StateError as exc:
            # The draft stays reserved and counted; the next draft closes it as interrupted. Its
            # text is still shown (the person may copy it), the run exits 5.
            finished, failed = finish(reserved), exc
        if batch.unsaved_state is not None:
            # Once more, as a batch does before it ends (watcher.pipeline.locked); the run exits
            # 5 all the same, having said so.
            with contextlib.suppress(StateError):
                provider_state.write_unsaved(batch.store, batch.unsaved_state)
    done = Drafted(finished, finished.drafts[-1], closed)
    batch.emit("draft.ok" if error is None else f"draft.error.{error.kind}", comment=cid)
    return replace(done, error=failed or _run_error(done, stop, unsaved))


def _settle(store: Store, cid: str, made: Draft) -> None:
    """Under the lock, once ``made``'s outcome is durable: the month's tally counts what it
    reported, else the worst case it was admitted with (no entry: it was never admitted)."""
    if made.worst_tokens is not None:
        key = key_of(cid, made.n, budget.DRAFT)
        budget.settle(store, key, draft_used(made, made.worst_tokens))


@contextmanager
def _releasing(call_lock: CallLock) -> Iterator[None]:
    """Let go of the comment's call lock once the block is done: after the outcome is durable, or
    once it never will be (SPEC §15.1)."""
    try:
        yield
    finally:
        call_lock.release()


def _known(batch: Batch, cid: str) -> InboxRecord:
    record = batch.store.load_record(cid)
    if record is None:
        raise UsageError(
            f"no comment {cid} in {batch.store.paths.inbox} — `watcher inbox --all` lists them"
        )
    return record


def _reserve(
    batch: Batch,
    cid: str,
    gate: gates.Gate,
    *,
    provider: str,
    model: str,
    counted: Prompt | None = None,
) -> tuple[InboxRecord, Draft | None, CallLock]:
    """Under the lock: re-read, close an orphan, check the cap, take the call lock, check the
    month's tokens for ``counted`` (the prompt of a call that spends them; ``None``: none), reserve
    durably (SPEC §7 steps 4.1–4.6 with drafts for attempts, §16.4)."""
    store = batch.store
    record = _known(batch, cid)
    closed = None
    if (last := drafts.open_draft(record)) is not None:
        out = draft_in_flight(batch, record, last)
        if out is not None:
            until = (
                f" (its call lock was removed or replaced: until {out.until})" if out.until else ""
            )
            raise _in_flight(batch, cid, f"draft {last.n} of pid {last.pid}{until}")
        # Its process died (its own call lock is free, or its pid is gone): closed, and counted
        # (§7 step 4.3).
        record = drafts.interrupt_draft(record, at=iso(batch.now()))
        store.save_record(record)
        closed = record.drafts[-1]
        _settle(store, cid, closed)
        batch.emit("draft.interrupted", comment=cid)
        batch.notice(f"note: {closed.error.message if closed.error else 'draft closed'}")
    why = drafts.refusal(record)
    if why is not None:
        raise UsageError(why)
    call_lock = store.call_lock(cid)
    if call_lock is None:
        raise _in_flight(batch, cid, "another run (a draft or a verdict)")
    try:
        reserved = drafts.reserve_draft(
            record,
            entrypoint=batch.run.entrypoint,
            provider=provider,
            model=model,
            at=iso(batch.now()),
        )
        if counted is not None:
            # Refused (BudgetReached, exit 3): nothing reserved, no half-open mark (SPEC §16.4).
            reserved = _admit(batch, reserved, counted)
        if gate.mode == "half_open":
            # The one real call of this interval, recorded before it goes (SPEC §16.6).
            provider_state.mark_half_open(store, cid, now=gate.at or batch.now())
        # The lock names the draft made under it before that is on disk, as an attempt's does
        # (watcher/pipeline/in_flight.py): a removed or replaced lock file is not "its run died".
        call_lock.stamp(draft_token(reserved.drafts[-1]))
        _save_reservation(store, reserved)
    except BaseException:
        call_lock.release()
        raise
    return reserved, closed, call_lock


def _admit(batch: Batch, reserved: InboxRecord, prompt: Prompt) -> InboxRecord:
    """The month's token check of the reserved, unwritten draft (:func:`budget.admit_tokens`): the
    record with the draft's worst case on it, its prompt at 4 characters a token plus the draft's
    output cap."""
    mine = reserved.drafts[-1]
    worst = worst_case(prompt, draft_calls.DRAFT_MAX_TOKENS)
    key = key_of(reserved.comment.id, mine.n, budget.DRAFT)
    budget.admit_tokens(
        batch.store, batch.settings.monthly_tokens, key, worst, mine.reserved_at[:7]
    )
    admitted = mine.model_copy(update={"worst_tokens": worst})
    return reserved.model_copy(update={"drafts": [*reserved.drafts[:-1], admitted]})


def _save_reservation(store: Store, reserved: InboxRecord) -> None:
    """Not on disk means not paid for: no call, and nothing counted for it."""
    try:
        store.save_record(reserved)
    except BaseException:
        mine = reserved.drafts[-1]
        if mine.worst_tokens is not None:
            budget.settle(store, key_of(reserved.comment.id, mine.n, budget.DRAFT), 0)
        raise


def _in_flight(batch: Batch, cid: str, what: str) -> LockBusy:
    return LockBusy(
        batch.store.paths.call_lock_file(cid),
        0.0,
        what=f"{what}, a call in flight now,",
    )


def _close(
    batch: Batch, cid: str, mine: Draft, finish: Callable[[InboxRecord], InboxRecord]
) -> InboxRecord:
    """Under the lock: write ``finish(current)`` if ``mine`` is still the record's open last draft
    (the compare-and-swap of SPEC §13.5), else write nothing and raise :class:`SaveConflict`."""
    store = batch.store
    current = _known(batch, cid)
    if not drafts.still_reserved(current, mine):
        raise SaveConflict(
            f"{store.paths.inbox_file(cid)}: draft {mine.n}, reserved by this run, is no longer "
            "the file's open last draft — another process wrote it without the pipeline lock. "
            "Nothing was written; this draft stays counted"
        )
    finished = finish(current)
    store.save_record(finished)
    return finished


def _prompt(batch: Batch, record: InboxRecord) -> Prompt:
    """The draft prompt: the comment, its parent, up to 5 of the author's earlier replies."""
    return draft_calls.render_draft(
        record.comment,
        parent_text=parent_text(batch.store, record),
        examples=voice_examples(batch.store, record),
    )


def parent_text(store: Store, record: InboxRecord) -> str | None:
    """The text of the comment ``record`` answers: as its verdict prompt fenced it (the text the
    thread showed when it was first seen), else from the parent's own record, else the excerpt
    the thread showed; ``None`` for a comment on the article itself."""
    comment = record.comment
    if comment.parent_id is None:
        return None
    fenced = prompts.fenced_blocks(record.prompt.user).get("PARENT")
    if fenced is not None:
        return fenced
    try:
        parent = store.load_record(comment.parent_id)
    except StateError:
        parent = None  # a broken parent file must not cost the draft
    return parent.comment.text if parent is not None else comment.parent_excerpt


def voice_examples(store: Store, record: InboxRecord) -> list[str]:
    """Up to 5 of the author's own replies to other comments, newest first, as the threads showed
    them (each record's ``author_replies``, kept by every scan). Only the records the index says
    the author answered are read, latest answer first: never every inbox file."""
    index = store.load_index()
    answered = sorted(
        (
            (entry.last_reply_at or entry.replied_at or "", cid)
            for cid, entry in index.comments.items()
            if cid != record.comment.id and (entry.last_reply_at or entry.replied_at)
        ),
        reverse=True,
    )
    found: list[tuple[str, str]] = []
    for _at, cid in answered:
        if len(found) >= draft_calls.MAX_EXAMPLES:
            break
        try:
            other = store.load_record(cid)
        except StateError:
            continue  # quarantined just now: one example fewer
        if other is not None:
            found += [(r.created_at, r.excerpt) for r in other.author_replies if r.excerpt.strip()]
    found.sort(reverse=True)
    return [text for _at, text in found[: draft_calls.MAX_EXAMPLES]]


def _error_of(answer: TextResult) -> DraftError | None:
    if answer.error is None:
        return None
    e = answer.error
    return DraftError(
        kind=e.kind, message=e.message, http_status=e.http_status, retry_after_s=e.retry_after_s
    )


def _run_error(
    done: Drafted, stop: tuple[str, WatcherError] | None, unsaved: StateError | None
) -> WatcherError | None:
    """The run's exit: 0 with a text; the stop's error for a stop kind (exit 3, or 2 to fix the
    setup); exit 3 for any other failed draft (the person tries again later, while drafts are
    left); exit 5 when what the next run must honour could not be written."""
    if unsaved is not None:
        return unsaved
    if stop is not None:
        return stop[1]
    made = done.draft
    if made.error is None:
        return None
    left = drafts.DRAFT_CAP - drafts.drafts_spent(done.record)
    return ProviderStop(
        f"draft {made.n} failed ({made.error.kind}): {made.error.message} — "
        f"{left} of {drafts.DRAFT_CAP} drafts left for {done.record.comment.id}"
    )
