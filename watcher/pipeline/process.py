"""SPEC §7 step 4, comment by comment: decide and reserve under the lock, call outside it (§15.1).

For each planned comment, under the lock: re-read → :func:`watcher.state.records.decide` → no call
(:func:`watcher.pipeline.outcomes.no_call`), or take its call lock and reserve durably. Then,
without the lock, one model call (:mod:`watcher.pipeline.calls`); then, under the lock again, the
outcome's compare-and-swap. A model call is only ever made for an attempt that is already on disk,
and its call lock marks it in flight until its outcome is, so no crash, kill or concurrent run can
buy a fourth call.

An outage costs one attempt, with parallel calls too (SPEC §16.6):

- *slow start*: the batch's first call goes out alone, and so does the first after any failed one;
  up to ``--parallel`` go out together only after a call the provider answered;
- a half-open call (an open breaker, :mod:`watcher.pipeline.gate`) goes out alone, and only its
  answer closes the breaker;
- a comment that spent an attempt in this outage, or whose last attempt failed on the provider's
  side less than 10 minutes ago (:mod:`watcher.pipeline.due`), is not called by a batch;
  ``recheck ID`` naming it is the person's choice and may.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from watcher.commands.results import ItemResult, ItemVerdict
from watcher.errors import (
    Cancelled,
    CorruptState,
    Interrupted,
    LockBusy,
    SaveConflict,
    SaveFailed,
    StateError,
)
from watcher.models import AttemptError, InboxRecord
from watcher.pipeline import budget, provider_state
from watcher.pipeline.batch import Batch, SignalDuringCall
from watcher.pipeline.calls import Calls, Flight
from watcher.pipeline.due import due_later
from watcher.pipeline.gate import GO, TRANSIENT_KINDS, TRANSIENT_STREAK, Gate, after_answer
from watcher.pipeline.in_flight import in_flight, token
from watcher.pipeline.outcomes import no_call, reread, state_stop
from watcher.pipeline.plan import Planned
from watcher.providers.classify import never_sent
from watcher.state import records
from watcher.state.records import decide
from watcher.util.timeutil import iso


@dataclass
class _Answers:
    """What the answers change while a batch runs: the gate (a half-open attempt that answered
    closes the breaker), the transient failures in a row, and the failures so far (``failures``:
    a call started before the latest failure re-opens no parallel calls by succeeding)."""

    gate: Gate
    streak: int
    failures: int = 0
    any_answered: bool = False  # the provider answered a call of this batch


def process(batch: Batch, plan: Sequence[Planned], gate: Gate, counted: Mapping[str, int]) -> None:
    """Decide and reserve comment by comment, with up to ``run.parallel`` calls out at once once
    the provider has answered (slow start, SPEC §16.6)."""
    # The comments that spent an attempt in this outage go last: if an earlier call shows the
    # provider answering again, the outage is over and they are called too (SPEC §16.6).
    plan = sorted(plan, key=lambda item: item.id in gate.spent)
    # Transient failures in a row, counted in the order the answers arrive (SPEC §13.1). A
    # half-open attempt continues the outage that opened the breaker: one more transient
    # failure is the second in a row.
    answers = _Answers(gate, TRANSIENT_STREAK - 1 if gate.mode == "half_open" else 0)
    # Nothing can abort a call from outside when no ``aborted`` hook is set (the MCP server sets
    # one): with --parallel 1 each call is then made on this thread (watcher/pipeline/calls.py).
    # A parallel batch's calls all go to workers, its slow start's lone ones too.
    alone = batch.run.hooks.aborted is None and batch.run.parallel == 1
    inline = batch.provider if alone else None
    calls = Calls(1, batch.new_provider, inline=inline, calling=batch.waiting_for_calls)
    if plan and batch.calls_model and gate.error is None:
        # Built before any lock: the first build imports httpx and makes a client (~0.1 s of CPU,
        # seconds on a starved machine), and a reservation names the provider.
        batch.provider()
        budget.prepare(batch)  # the month's token tally, if there is none yet (SPEC §16.4)
    begun = 0  # the items met so far; a signal leaves the rest not_started
    unreached = 0  # items a stop left not_started, which count toward the limit like calls
    try:
        for position, item in enumerate(plan):
            while calls.in_flight and (
                len(calls.in_flight) >= calls.capacity or answers.gate.mode == "half_open"
            ):
                _collect(batch, calls, answers)
            begun = position + 1
            may = _may_start(batch, left=len(plan) - position, unreached=unreached)
            if may == "done":
                break
            if may == "unreached":
                unreached += 1
                batch.add(ItemResult(item.id, "not_started"))
                continue
            flight = _begin(batch, item, answers.gate, counted)
            if flight is not None:
                flight.after_failures = answers.failures
                calls.start(flight)
            elif batch.stopped and batch.result.items and batch.result.items[-1].id == item.id:
                unreached += (
                    batch.result.items[-1].outcome == "not_started"
                )  # it stopped at this one
            _note_out(batch, calls)
        begun = len(plan)
        while calls.in_flight:
            _collect(batch, calls, answers)
    except SignalDuringCall as sig:
        _interrupted_in_flight(batch, calls, sig.signum)
        for item in plan[begun:]:
            batch.add(ItemResult(item.id, "not_started"))
    finally:
        calls.close()
    _still_closed(batch, answers)


def _may_start(batch: Batch, *, left: int, unreached: int) -> Literal["go", "unreached", "done"]:
    """Whether the next planned comment may be met: ``unreached`` when the batch has stopped (it is
    listed not_started), ``done`` when the limit is reached (the rest are only counted)."""
    _front_end_stop(batch)
    if batch.interrupted is not None and not batch.stopped:
        batch.stop("interrupted", Interrupted(batch.interrupted))
    result = batch.result
    if batch.stopped and result.calls + unreached < batch.run.limit:
        return "unreached"
    if batch.stopped or result.calls >= batch.run.limit:
        # Beyond the limit the run would not have called them anyway: counted, not listed
        # (SPEC §7.1) — a stop at the first of 27 planned is 5 rows, not 27.
        result.remaining = left
        return "done"
    return "go"


def _still_closed(batch: Batch, answers: _Answers) -> None:
    """Nothing needed a call this time, or every comment that did had spent an attempt in this
    outage, but the run still says it may not call (SPEC §7.2, §13.1, §16.6): a cron job must not
    mistake "no calls allowed" for "all caught up"."""
    gate = answers.gate
    if batch.interrupted is not None and not batch.stopped:
        batch.stop("interrupted", Interrupted(batch.interrupted))
    if batch.stopped:
        return
    if gate.error is not None:
        batch.stop(gate.stop, gate.error)
    elif gate.unproven is not None and batch.left_for_outage and not answers.any_answered:
        batch.stop("breaker" if gate.mode == "half_open" else "cooldown", gate.unproven)


def _front_end_stop(batch: Batch) -> None:
    """The MCP client cancelled the call (no further call; SPEC §15.4), or the server is going
    (as a signal would: every call out is closed as interrupted)."""
    hooks = batch.run.hooks
    if hooks.aborted is not None and (signum := hooks.aborted()) is not None:
        batch.interrupted = batch.interrupted or signum
    if hooks.cancelled is not None and not batch.stopped and hooks.cancelled():
        batch.stop("cancelled", Cancelled())


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
    flying = in_flight(batch, record)
    action = decide(
        batch.run.command,
        record,
        item.fingerprint,
        now=batch.now(),
        seen_attempts=counted.get(item.id, 0),
        call_in_flight=flying is not None,
    )
    if action != "call":
        no_call(batch, record, action, live=flying or False)
        return None
    if not batch.calls_model:
        result.for_agent += 1  # provider agent: it stays pending or failed until an agent claims it
        return None
    if gate.error is not None:
        batch.stop(gate.stop, gate.error)
        batch.add(ItemResult(item.id, "not_started", message=str(gate.error)))
        return None
    cid = record.comment.id
    if cid not in batch.named and _not_now(batch, record, gate):
        return None
    call_lock = store.call_lock(cid)
    if call_lock is None:  # another process holds it, or its file was replaced as it was taken
        no_call(batch, record, "deferred", live=True)
        return None
    provider = batch.provider()
    reserved = records.reserve(
        record,
        command=batch.run.command,
        entrypoint=batch.run.entrypoint,
        provider=provider.name,
        model=provider.model,
    )
    # The month's tokens, checked in this hold and before anything is written (SPEC §16.4).
    admitted = budget.admit(batch, reserved, call_lock)
    if admitted is None:
        return None
    if gate.mode == "half_open":
        # The one real attempt of this interval, recorded before the call (SPEC §16.6).
        provider_state.mark_half_open(store, cid, now=gate.at or batch.now())
    # The lock names the reservation made under it before that is on disk: a run that finds the
    # reservation open trusts a free lock only then (watcher/pipeline/in_flight.py).
    call_lock.stamp(token(admitted.attempts[-1]))
    try:
        reservation = store.write_reservation(admitted)
    except SaveFailed as exc:
        # Not reserved on disk means not paid for: no call.
        call_lock.release()
        budget.take_back(batch, admitted)
        state_stop(batch, cid, "reserve_failed", exc)
        return None
    result.calls += 1
    if batch.run.hooks.on_call is not None:
        batch.run.hooks.on_call(cid)
    return Flight(reservation, call_lock, half_open=gate.mode == "half_open")


def _not_now(batch: Batch, record: InboxRecord, gate: Gate) -> bool:
    """Whether a batch leaves this comment for later though it may be called (SPEC §16.3, §16.6):
    it spent an attempt in this outage, or its last attempt failed on the provider's side less
    than 10 minutes ago. Said as ``deferred``, with when or what lets it go."""
    cid, n = record.comment.id, len(record.attempts)
    if cid in gate.spent:
        batch.left_for_outage += 1
        why = (
            "it spent an attempt in this provider outage already: no batch calls it again "
            "until the provider has answered another comment "
            f"(`watcher recheck {cid}` tries it now)"
        )
    elif (due := due_later(record, batch.now())) is not None:
        last = record.attempts[-1]
        kind = last.error.kind if last.error is not None else "error"
        why = (
            f"attempt {n} failed on the provider's side ({kind}): next due at {due} "
            f"(`watcher recheck {cid}` tries it now)"
        )
    else:
        return False
    batch.emit("item.deferred", comment=cid)
    batch.add(ItemResult(cid, "deferred", message=why, attempts=records.spent(record)))
    return True


def live_call(batch: Batch, record: InboxRecord) -> bool:
    """Whether the record's open reservation (no agent lease) is a call in flight elsewhere
    (:func:`watcher.pipeline.in_flight.in_flight` says which, and why)."""
    return in_flight(batch, record) is not None


def _collect(batch: Batch, calls: Calls, answers: _Answers) -> None:
    """Wait for the next answer and write its outcome under the lock (steps 4.8–4.10)."""
    with batch.waiting_for_calls():
        flight = calls.next_done(batch.run.hooks.aborted)
    error = _finish(batch, flight, answers)
    answered = error is None or error.kind not in _FAILED
    answers.any_answered = answers.any_answered or answered
    if answered and answers.gate.spent:
        # The provider answered: the outage is over, and so is what it kept from being called.
        answers.gate = dataclasses.replace(answers.gate, spent=frozenset(), unproven=None)
    if not answered:
        # Slow start: the first call after a failure goes out alone (SPEC §16.6).
        answers.failures += 1
        calls.capacity = 1
    elif answers.gate.mode == "go" and flight.after_failures == answers.failures:
        calls.capacity = batch.run.parallel  # the provider answered since the last failure
    answers.streak = (
        answers.streak + 1 if error is not None and error.kind in TRANSIENT_KINDS else 0
    )
    _note_out(batch, calls)


# Failures of the provider or the setup, not of the model's answer: they end a slow start's
# parallel calls (an answer that did not parse still shows the provider answering).
_FAILED = frozenset(
    {
        *TRANSIENT_KINDS,
        "rate_limited",
        "quota_exhausted",
        "unreachable",
        "auth",
        "model_not_found",
        "bad_request",
        "interrupted",
    }
)


def _note_out(batch: Batch, calls: Calls) -> None:
    """The calls already sent when the batch stopped: they finish and are saved (SPEC §15.1)."""
    if batch.stopped and not batch.result.already_out:
        batch.result.already_out = len(calls.in_flight)


def _finish(batch: Batch, flight: Flight, answers: _Answers) -> AttemptError | None:
    """The outcome of one answered call, written by compare-and-swap (SPEC §13.5). Returns its
    error."""
    store, cid = batch.store, flight.comment_id
    answer = flight.answer
    assert answer is not None
    error = answer.error
    try:
        with store.pipeline_lock():
            # On disk before the outcome: what the next run must honour survives a failed save.
            stop, unsaved, closed = after_answer(
                batch, error, streak=answers.streak, half_open=flight.half_open, comment=cid
            )
            if closed:
                answers.gate = GO  # the half-open attempt answered: the setup works again
                batch.notice("note: the provider answers again (its breaker is closed)")
            finished_at = iso(batch.now())
            try:
                finished = store.write_outcome(
                    flight.reservation,
                    lambda current: _stamped(
                        records.finish(
                            current,
                            verdict=answer.verdict,
                            error=error,
                            raw=answer.raw,
                            usage=answer.usage,
                            duration_ms=answer.duration_ms,
                        ),
                        finished_at,
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
    n = records.spent(finished)
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


def _stamped(record: InboxRecord, finished_at: str) -> InboxRecord:
    """The finished attempt stamped by the batch's clock (the 10-minute rule reads it, SPEC §16.3)
    and marked ``not_sent`` when its request never left the machine: not counted (§16.3)."""
    last = record.attempts[-1]
    update: dict[str, object] = {"finished_at": finished_at}
    if last.error is not None and never_sent(last.error.kind):
        update["not_sent"] = True
    return record.model_copy(
        update={"attempts": [*record.attempts[:-1], last.model_copy(update=update)]}
    )


def _interrupted_in_flight(batch: Batch, calls: Calls, signum: int) -> None:
    """Ctrl-C or SIGTERM while calls were out: each request may have been sent, so each attempt
    stays counted; they are closed as interrupted at once rather than left for the next run
    (SPEC §13.6). An answer that had already arrived is saved as it is."""
    error = Interrupted(signum)
    batch.interrupted = batch.interrupted or signum
    for flight in calls.in_flight:
        calls.forget(flight)
        if flight.answer is not None:
            _finish(batch, flight, _Answers(GO, 0))
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
