"""May this run call the model, and when must it stop? (SPEC §6 table, §7.2, §13.1, §15.5, §16.6)

A broken setup (a down server, a wrong URL, a retired model, a revoked key) fails every comment
the same way, so it must not be paid for comment by comment:

- a setup kind (or two transient failures in a row, in one run or across runs) stops the batch at
  once and opens the *breaker* in provider.json;
- only a real call the provider answers closes it: a *half-open* call, alone, at most one per
  interval (1, 2, 4 … minutes, doubling while it fails, at most an hour), never to a comment that
  already spent an attempt in this outage. Where a free *probe* of the models endpoint can see the
  failure (a refused connection, a revoked key) a failing probe keeps the run from calling at all;
  a probe that passes proves nothing of the chat endpoint, so it closes nothing;
- where no probe can tell — no models endpoint, a ``bad_request``, or a ``model_not_found`` from a
  real call, which a models list naming the model does not undo — the interval is an hour, the
  first an hour after the call that opened the breaker.

A 429 stops the batch with a cooldown, its Retry-After or watcher's own growing wait; a cooldown
that never reached the disk is found on its attempt and written before any call; while 429s come in
a row, the comments they spent are not called again until the provider answers another.

So an outage costs one attempt per stop plus the half-open calls, no comment spends two, and every
run during it exits non-zero and says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from watcher.errors import (
    CooldownActive,
    ProviderSetup,
    ProviderUnavailable,
    QuotaExhausted,
    RateLimited,
    StateError,
    WatcherError,
)
from watcher.models import AttemptError, Breaker, ProviderState, SeenFile
from watcher.pipeline import provider_state
from watcher.pipeline.batch import Batch
from watcher.pipeline.due import PROVIDER_SIDE_KINDS
from watcher.providers.classify import never_sent

# SPEC §6 table, "stops the batch" column.
STOP_AT_ONCE = frozenset(
    {"rate_limited", "quota_exhausted", "auth", "model_not_found", "bad_request", "unreachable"}
)
# Worth another try later, but two in a row in one batch is an outage, not bad luck.
TRANSIENT_KINDS = PROVIDER_SIDE_KINDS
TRANSIENT_STREAK = 2
# The user must change something (exit 2); the rest should pass by waiting (exit 3).
FIX_KINDS = frozenset({"auth", "model_not_found", "bad_request"})
# Breakers no models endpoint can close: a bad request is in the request body; and a server whose
# list names the model while every call says model_not_found would close it each run and spend an
# attempt each time (SPEC §15.5: the breaker trusts the call, not the menu).
NO_PROBE_KINDS = frozenset({"bad_request", "model_not_found"})
# Answers that are the model's, not the provider failing: malformed or refused, but an answer.
ANSWER_KINDS = frozenset({"malformed_json", "invalid_verdict", "refused", "truncated"})

GateMode = Literal["go", "half_open", "closed"]


@dataclass(frozen=True)
class Gate:
    """What the run may do with the model. ``error`` is why it may not (``closed``)."""

    mode: GateMode
    error: WatcherError | None = None
    stop: str = ""  # the summary's "stopped" when closed: cooldown | breaker
    close_breaker: bool = False  # for another setup: closed under the lock before the first call
    # A 429's cooldown that never reached the disk (provider_state.pending_cooldown): written under
    # the lock before anything else, and the run makes no call.
    pending: ProviderState | None = None
    # Comments that spent an attempt in this outage: no batch calls them until it ends (§16.6).
    spent: frozenset[str] = frozenset()
    # Half-open: the run's error if it makes no half-open call (the breaker stays open), and
    # when the run was let through: the half-open call is stamped with it, so a cron every
    # half hour meets an interval of an hour exactly.
    unproven: WatcherError | None = None
    at: datetime | None = None


GO = Gate("go")


def admit(batch: Batch, index: SeenFile) -> Gate:
    """The go/no-go, decided before the lock (the probe is network). Never spends an attempt.
    ``index``: the run's reconciled index, where a 429 whose cooldown was not written is looked for.

    An open breaker is closed only by a real call that the provider answers (SPEC §16.6): a
    half-open call, at most one per interval; the free probe of the models endpoint can only
    keep it shut, since it says nothing of the chat endpoint."""
    settings, now = batch.settings, batch.now()
    state = batch.store.load_provider_state()
    cooldown = provider_state.read_cooldown(batch.store, state, now=now)
    if cooldown is not None:
        return Gate("closed", cooldown, "cooldown")
    pending = provider_state.pending_cooldown(batch.store, index, state, now=now)
    if pending is not None and pending.cooldown_until is not None:
        waited = CooldownActive(
            pending.cooldown_until,
            f"{pending.reason} (recorded on its attempt; its cooldown could not be written then)",
        )
        return Gate("closed", waited, "cooldown", pending=pending)
    spent = provider_state.in_outage(settings, state)
    breaker = provider_state.breaker_of(settings, state)
    if breaker is None:
        # A breaker left for another setup is closed by the first save under the lock.
        unproven = (
            ProviderUnavailable(
                f"provider refusing calls ({state.rate_limited_in_a_row} 429s or quota refusals "
                "in a row): every "
                "comment this run would call spent an attempt in this outage — no attempts spent "
                "this run; a new comment, or one you name to `watcher recheck`, is tried next"
            )
            if spent
            else None
        )
        return Gate("go", close_breaker=state.breaker is not None, spent=spent, unproven=unproven)
    hourly = breaker.kind in NO_PROBE_KINDS
    if not hourly and breaker.kind not in TRANSIENT_KINDS:
        probe = batch.provider().probe()
        if not probe.ok and probe.kind != "no_models_endpoint":
            return _closed(breaker.since, probe.kind or breaker.kind, probe.message)
        hourly = not probe.ok  # no models endpoint: nothing can tell but an hourly real call
        if probe.ok and breaker.failed_half_opens == 0:
            return _half_open(breaker, spent, now)  # the setup may be fixed: try it now
    if provider_state.may_half_open(breaker, now=now, hourly=hourly):
        return _half_open(breaker, spent, now)
    due = provider_state.next_half_open(breaker, hourly=hourly)
    if breaker.kind == "model_not_found":
        why = (
            f"{breaker.message} (a real call said so; a models list naming the model does not "
            f"undo that: the next real attempt is allowed at {due}, or change WATCHER_MODEL or "
            "WATCHER_BASE_URL to try another setup now)"
        )
    elif hourly:
        why = (
            f"{breaker.message} (one real attempt per hour is allowed where no probe can tell; "
            f"the next at {due})"
        )
    else:
        why = (
            f"{breaker.message} (only a real call can tell it answers again: the next is allowed "
            f"at {due}, the wait doubling while it fails, at most an hour)"
        )
    return _closed(breaker.since, breaker.kind, why)


def _half_open(breaker: Breaker, spent: frozenset[str], now: datetime) -> Gate:
    why = (
        f"{breaker.message} (the next real call goes to a comment that has not spent an attempt "
        "in this outage: a new one, or one you name to `watcher recheck`)"
    )
    unproven = _closed(breaker.since, breaker.kind, why).error
    return Gate("half_open", spent=spent, unproven=unproven, at=now)


def _closed(since: str, kind: str, reason: str) -> Gate:
    message = f"provider unavailable since {since}: {reason} — no attempts spent this run"
    return Gate("closed", setup_error(kind, message), "breaker")


def setup_error(kind: str, message: str) -> WatcherError:
    """A failed setup as the run's error: exit 2 for what the user must fix, else exit 3 (wait)."""
    return ProviderSetup(message, cause=kind) if kind in FIX_KINDS else ProviderUnavailable(message)


def stops(error: AttemptError, streak: int) -> bool:
    """Whether this outcome stops the batch; ``streak`` counts transient failures in a row so far,
    this one included."""
    return error.kind in STOP_AT_ONCE or (
        error.kind in TRANSIENT_KINDS and streak >= TRANSIENT_STREAK
    )


def answer_of(error: AttemptError | None) -> provider_state.Answer:
    """What an outcome says of the provider, for its failures in a row (provider_state.remember)."""
    if error is None or error.kind in ANSWER_KINDS:
        return "answered"
    if error.kind in TRANSIENT_KINDS:
        return "transient"
    # A quota refusal is a 429 that waiting will not end: in a row with them, it keeps the
    # comments it spent from being called again until the provider answers (SPEC §16.6).
    return "rate_limited" if error.kind in ("rate_limited", "quota_exhausted") else "other"


def stop_for(
    batch: Batch, state: ProviderState, error: AttemptError, *, half_open: bool = False
) -> tuple[tuple[str, WatcherError], ProviderState]:
    """Name the stop and its error, and the provider state the next run must honour (cooldown,
    breaker): ``state`` (as the answer left it) with them. Writes nothing.

    Its caller writes that state before the outcome: a save that fails must not lose the cooldown or
    the breaker, or the next run seconds later would call again.
    """
    settings, kind, said = batch.settings, error.kind, error.message
    if kind == "quota_exhausted":
        return (
            kind,
            QuotaExhausted(f"provider quota exhausted: {said} — check your plan or spend limit"),
        ), state
    if kind == "rate_limited":
        wait = provider_state.cooldown_wait(
            error.retry_after_s, in_a_row=state.rate_limited_in_a_row
        )
        state = provider_state.with_cooldown(
            state, wait, reason=f"rate_limited: {said}", now=batch.now()
        )
        own = error.retry_after_s is None or not error.retry_after_s > 0
        how = (
            (
                f" (it gave no usable Retry-After: watcher waits {wait / 60:g} min, doubling "
                "while the 429s continue, at most an hour)"
            )
            if own
            else ""
        )
        return (
            kind,
            RateLimited(
                f"provider rate limit (HTTP 429); no model calls until {state.cooldown_until}{how}"
            ),
        ), state
    state = provider_state.with_breaker(
        state, settings, kind=kind, message=said, now=batch.now(), half_open_failed=half_open
    )
    return (kind, _setup_stop(batch, kind, said)), state


def _setup_stop(batch: Batch, kind: str, said: str) -> WatcherError:
    settings = batch.settings
    setup = f"{settings.provider} model {settings.model} at {settings.shown_base_url}"
    if kind == "auth":
        # ``said`` is the provider's hint, which names the variable the key came from.
        return ProviderSetup(f"{said} — no further attempts until it is fixed", cause=kind)
    if kind == "model_not_found":
        # ``said`` already names the model, the fix and how to list the server's models.
        return ProviderSetup(
            f"{said} — `watcher check` asks the server for it (free); one real attempt an "
            "hour until then",
            cause=kind,
        )
    if kind == "bad_request":
        return ProviderSetup(
            f"{setup}: the provider refused the request ({said}) — check WATCHER_MODEL "
            "and WATCHER_BASE_URL",
            cause=kind,
        )
    if kind == "unreachable":
        return ProviderUnavailable(
            f"provider unreachable: {said} — the next run checks it for free "
            "before spending an attempt"
        )
    return ProviderUnavailable(
        f"the provider failed {TRANSIENT_STREAK} times in a row (last: {kind}: {said}); "
        "stopped to save attempts — a later run tries one comment first, in a minute at the "
        "earliest"
    )


def after_answer(
    batch: Batch,
    error: AttemptError | None,
    *,
    streak: int,
    half_open: bool,
    comment: str,
) -> tuple[tuple[str, WatcherError] | None, StateError | None, bool]:
    """Under the pipeline lock, before the answer's outcome is written: the provider state this
    answer leaves — its failures in a row, a stop's cooldown or breaker, a half-open attempt's
    breaker closed — written once if it changed (SPEC §13.1, §13.5, §15.5, §16.6).

    ``streak``: transient failures in a row in this run so far; one remembered from an earlier run
    counts as well, so this one may be the second in a row. ``comment``: whose attempt it was; a
    counted failure puts it among the outage's spent comments. Returns the stop (``None``: the
    batch goes on), the error that kept the state off the disk, and whether the breaker was
    closed."""
    store = batch.store
    transient = error is not None and error.kind in TRANSIENT_KINDS
    try:
        state = store.load_provider_state()
    except StateError as exc:  # quarantined just now: the stop still stops, nothing is remembered
        stop = (
            stop_for(batch, ProviderState(), error)[0]
            if error is not None and stops(error, streak + transient)
            else None
        )
        return stop, exc, False
    counted = error is not None and not never_sent(error.kind)
    new = provider_state.remember(
        state,
        answer_of(error),
        kind=error.kind if error is not None else "",
        now=batch.now(),
        spent=comment if counted else None,
    )
    stop, closed = None, False
    if error is not None and stops(error, max(streak, state.transient is not None) + transient):
        stop, new = stop_for(batch, new, error, half_open=half_open)
    elif half_open and not batch.stopped:
        new, closed = new.model_copy(update={"breaker": None, "spent": []}), True
    if new == state:
        return stop, None, closed
    try:
        store.save_provider_state(new)
    except StateError as exc:
        batch.unsaved_state = new  # tried again before the run ends (locked.carry_out)
        return stop, exc, closed
    return stop, None, closed
