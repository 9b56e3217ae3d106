"""The provider state: the cooldown after a 429 (SPEC §7.2), the breaker (SPEC §13.1), and the
provider's failures in a row across runs (SPEC §15.5).

Each says "no model call now" (or "the next failure stops the batch") for a reason the next run
must honour. The state an answer leaves is built by pure functions (:func:`with_cooldown`,
:func:`with_breaker`, :func:`remember`) and written once per answer under the pipeline lock, before
the answer's outcome (SPEC §13.5), as a read-modify-write of the whole state: a cooldown never
erases a breaker or the other way round. The state is the store's (``provider.json`` for the files).

Times that do not parse make the state quarantined on read (the models validate them, SPEC §13.5).
A cooldown further away than the wait it was set for was set while the clock ran ahead and is
dropped; one that does not say its wait (an older release's) lasts at most :data:`MAX_COOLDOWN`
from *now*, whatever the file or the provider said. A 429 whose cooldown never reached the state
(its write failed) is found again on its attempt by :func:`pending_cooldown`.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Literal

from watcher.config import Settings
from watcher.errors import CooldownActive, LockBusy, StateError
from watcher.models import Breaker, ProviderState, SeenFile, TransientFailure
from watcher.store import Store
from watcher.util.timeutil import iso, parse_iso, utcnow

HALF_OPEN_EVERY = timedelta(hours=1)
FIRST_HALF_OPEN = timedelta(minutes=1)
HALF_OPEN_SLACK = timedelta(seconds=30)
# The longest wait a Retry-After can impose (the same bound as providers.classify).
MAX_COOLDOWN = timedelta(days=7)
# A 429 without a usable Retry-After (none, negative, NaN, empty, a date gone by): watcher's own
# wait, doubled for each 429 in a row — without one an always-429 provider costs an attempt
# every run.
FIRST_BACKOFF = timedelta(minutes=1)
MAX_BACKOFF = timedelta(hours=1)
# A clock step of this much (NTP, a laptop waking up) does not make an honest cooldown look as if
# it had been set while the clock ran ahead.
CLOCK_SLACK = timedelta(minutes=1)
# Every time here is the caller's ``now`` — a batch's is :meth:`watcher.pipeline.batch.Batch.now`,
# the hooks' clock in tests (tests/_fakes/clock.py) — stamps included: one clock for what is
# written and what it is judged against. Without one, this module's utcnow().


# ---- cooldown ------------------------------------------------------------------------------------


def _now(now: datetime | None) -> datetime:
    return utcnow() if now is None else now


def read_cooldown(
    store: Store,
    state: ProviderState | None = None,
    *,
    now: datetime | None = None,
) -> CooldownActive | None:
    """The active cooldown, or ``None`` once it has passed or when it cannot be a real one."""
    state = store.load_provider_state() if state is None else state
    if state.cooldown_until is None:
        return None
    now = _now(now)
    until = parse_iso(state.cooldown_until)
    if until <= now:
        return None
    if (
        state.retry_after_s is not None
        and until - now > timedelta(seconds=state.retry_after_s) + CLOCK_SLACK
    ):
        # Set while the clock ran ahead: a "Retry-After: 60" stamped a year early would block runs
        # for the 7 days of the cap once the clock is right. Dropped, and written down: judged
        # again as the true time nears it, it would look honest for its last minute.
        _rewrite(store, state.cooldown_until, None)
        return None
    if until <= now + MAX_COOLDOWN:
        return CooldownActive(state.cooldown_until, state.reason or "rate limited")
    capped = iso(now + MAX_COOLDOWN)
    # Capping only in memory would be a target that moves with the clock: "now + 7 days" on
    # every read never ends. The first read that caps it writes the cap down, so it ends.
    _rewrite(store, state.cooldown_until, capped)
    return CooldownActive(capped, state.reason or "rate limited")


def _rewrite(store: Store, far: str, replacement: str | None) -> None:
    """Cap (or, with ``None``, drop) a cooldown, if nobody changed it meanwhile; best effort.

    Readers (``status``, the gate before the lock) hold no lock, so this takes the pipeline lock
    without waiting: the provider state is a read-modify-write under it. Busy or not writable →
    the judgement still applies in memory, and the next read makes it again.
    """
    try:
        with store.pipeline_lock(timeout=0):
            state = store.load_provider_state()
            if state.cooldown_until == far:
                dropped = {"reason": None, "retry_after_s": None} if replacement is None else {}
                store.save_provider_state(
                    state.model_copy(update={"cooldown_until": replacement, **dropped})
                )
    except (LockBusy, StateError):
        pass


def cooldown_wait(retry_after_s: float | None, *, in_a_row: int) -> float:
    """Seconds of cooldown after a 429: its ``Retry-After`` if that is a positive number of
    seconds (at most 7 days), else 1, 2, 4 … minutes for the ``in_a_row``-th 429 in a row, at most
    an hour."""
    if retry_after_s is not None and not math.isnan(retry_after_s) and retry_after_s > 0:
        return min(retry_after_s, MAX_COOLDOWN.total_seconds())
    doubled = math.ldexp(
        FIRST_BACKOFF.total_seconds(), min(max(in_a_row, 1) - 1, 20)
    )  # 60 s * 2**(n-1)
    return min(doubled, MAX_BACKOFF.total_seconds())


def with_cooldown(
    state: ProviderState,
    seconds: float,
    *,
    reason: str,
    now: datetime | None = None,
) -> ProviderState:
    """``state`` with "no model call for ``seconds``" (at most 7 days; infinite or NaN: 7 days),
    the wait recorded beside it."""
    limit = MAX_COOLDOWN.total_seconds()
    wait = limit if not math.isfinite(seconds) else min(max(0.0, seconds), limit)
    return state.model_copy(
        update={
            "cooldown_until": iso(_now(now) + timedelta(seconds=wait)),
            "reason": reason,
            "retry_after_s": wait,
        }
    )


def write_cooldown(
    store: Store, seconds: float, *, reason: str, now: datetime | None = None
) -> str:
    """Record a cooldown of ``seconds`` from ``now`` (:func:`with_cooldown`); returns its end."""
    state = with_cooldown(store.load_provider_state(), seconds, reason=reason, now=now)
    store.save_provider_state(state)
    assert state.cooldown_until is not None
    return state.cooldown_until


def pending_cooldown(
    store: Store,
    index: SeenFile,
    state: ProviderState,
    *,
    now: datetime | None = None,
) -> ProviderState | None:
    """The state with the cooldown of a 429 that never reached it, or ``None`` when there is none.

    A 429's cooldown is written before its outcome; when that write fails (a full disk) the run
    stops, but the outcome still records the 429 and its ``Retry-After`` on the attempt. So before
    any call the gate looks at the comments that failed in the last 7 days (the longest cooldown)
    for a last attempt that was rate limited and whose wait has not passed, and the run writes that
    cooldown first (SPEC §15.5). The same finds a cooldown lost with a quarantined provider.json.
    """
    now = _now(now)
    horizon = now - MAX_COOLDOWN
    found: tuple[datetime, float, str] | None = None
    for cid, entry in index.comments.items():
        if entry.status not in ("failed", "exhausted") or parse_iso(entry.updated_at) < horizon:
            continue
        try:
            record = store.load_record(cid)
        except StateError:
            continue  # the run meets it again where it reads that comment, and says so there
        last = record.attempts[-1] if record is not None and record.attempts else None
        if (
            last is None
            or last.error is None
            or last.error.kind != "rate_limited"
            or last.finished_at is None
        ):
            continue
        wait = cooldown_wait(last.error.retry_after_s, in_a_row=state.rate_limited_in_a_row)
        until = parse_iso(last.finished_at) + timedelta(seconds=wait)
        if until <= now or until - now > timedelta(seconds=wait) + CLOCK_SLACK:
            continue  # over, or stamped while the clock ran ahead (see read_cooldown)
        if found is None or until > found[0]:
            found = (until, wait, last.error.message)
    if found is None:
        return None
    until, wait, said = found
    if state.cooldown_until is not None and parse_iso(state.cooldown_until) >= until - CLOCK_SLACK:
        return None  # written: this is the cooldown on disk (it is stamped just before the outcome)
    return state.model_copy(
        update={
            "cooldown_until": iso(until),
            "reason": f"rate_limited: {said}",
            "retry_after_s": wait,
        }
    )


def write_pending(store: Store, pending: ProviderState) -> None:
    """Under the pipeline lock: write the cooldown :func:`pending_cooldown` found, unless one as
    long is on disk by now. Raises :class:`watcher.errors.SaveFailed` if it cannot be written."""
    state = store.load_provider_state()
    if (
        state.cooldown_until is not None
        and pending.cooldown_until is not None
        and parse_iso(state.cooldown_until) >= parse_iso(pending.cooldown_until)
    ):
        return
    store.save_provider_state(
        state.model_copy(
            update={
                "cooldown_until": pending.cooldown_until,
                "reason": pending.reason,
                "retry_after_s": pending.retry_after_s,
            }
        )
    )


def write_unsaved(store: Store, unsaved: ProviderState) -> None:
    """Write what an answer left that could not be written then: its cooldown (unless one as long
    is on disk by now) and its breaker, over the state as it is now."""
    state = store.load_provider_state()
    update: dict[str, object] = {}
    if unsaved.cooldown_until is not None and (
        state.cooldown_until is None
        or parse_iso(state.cooldown_until) < parse_iso(unsaved.cooldown_until)
    ):
        update.update(
            cooldown_until=unsaved.cooldown_until,
            reason=unsaved.reason,
            retry_after_s=unsaved.retry_after_s,
            rate_limited_in_a_row=max(state.rate_limited_in_a_row, unsaved.rate_limited_in_a_row),
        )
    if unsaved.breaker is not None and state.breaker is None:
        update.update(breaker=unsaved.breaker, spent=unsaved.spent)
    if update:
        store.save_provider_state(state.model_copy(update=update))


# ---- the provider's failures in a row ------------------------------------------------------------

Answer = Literal["answered", "transient", "rate_limited", "other"]


def remember(
    state: ProviderState,
    answer: Answer,
    *,
    kind: str = "",
    now: datetime | None = None,
    spent: str | None = None,
) -> ProviderState:
    """``state`` after one more answer (SPEC §13.1, §15.5, §16.6). A transient failure is
    remembered until the provider answers (a verdict, or an answer that did not parse), so the next
    one is the second in a row whichever run it falls in; 429s are counted until then, for the wait
    of the next one; and so is each comment that ``spent`` a counted attempt on a failure."""
    if answer == "answered":
        if state.transient is None and state.rate_limited_in_a_row == 0 and not state.spent:
            return state  # the usual case writes nothing
        return state.model_copy(update={"transient": None, "rate_limited_in_a_row": 0, "spent": []})
    if spent is not None and spent not in state.spent:
        state = state.model_copy(update={"spent": [*state.spent, spent]})
    if answer == "transient" and state.transient is None:
        failure = TransientFailure(kind=kind, at=iso(_now(now)))
        return state.model_copy(update={"transient": failure})
    if answer == "rate_limited":
        return state.model_copy(update={"rate_limited_in_a_row": state.rate_limited_in_a_row + 1})
    return state


def in_outage(settings: Settings, state: ProviderState) -> frozenset[str]:
    """The comments no batch may call now because each spent an attempt in this outage: a breaker
    open for this setup, or 429s in a row (SPEC §16.6). Empty when there is no outage."""
    if breaker_of(settings, state) is None and state.rate_limited_in_a_row == 0:
        return frozenset()
    return frozenset(state.spent)


# ---- breaker -------------------------------------------------------------------------------------


def breaker_of(settings: Settings, state: ProviderState) -> Breaker | None:
    """The open breaker *for this setup*. One opened for another provider, model or base URL
    does not hold: changing the setup is how a user says "try this instead"."""
    breaker = state.breaker
    if breaker is None or (breaker.provider, breaker.model, breaker.base_url) != _setup(settings):
        return None
    return breaker


def with_breaker(
    state: ProviderState,
    settings: Settings,
    *,
    kind: str,
    message: str,
    now: datetime | None = None,
    half_open_failed: bool = False,
) -> ProviderState:
    """``state`` with the breaker open (or kept open) for this setup; ``since`` stays the outage's.
    ``half_open_failed``: a half-open call failed, so the next waits twice as long (§16.6)."""
    old = breaker_of(settings, state)
    provider, model, base_url = _setup(settings)
    failures = (old.failed_half_opens if old else 0) + half_open_failed
    breaker = Breaker(
        kind=kind,
        message=message,
        since=old.since if old else iso(_now(now)),
        provider=provider,
        model=model,
        base_url=base_url,
        half_open_at=old.half_open_at if old else None,
        failed_half_opens=failures,
    )
    return state.model_copy(update={"breaker": breaker})


def close_breaker(store: Store) -> None:
    """Close the breaker; the outage's spent comments go with it (another setup, a new outage)."""
    state = store.load_provider_state()
    if state.breaker is not None:
        store.save_provider_state(state.model_copy(update={"breaker": None, "spent": []}))


def half_open_every(breaker: Breaker, *, hourly: bool) -> timedelta:
    """The wait between two half-open calls (SPEC §13.1, §16.6): an hour where no probe can tell
    (``hourly``: no models endpoint, a bad request, a model a real call said is missing); else
    1, 2, 4 … minutes, doubling with each half-open call that failed, at most an hour."""
    if hourly:
        return HALF_OPEN_EVERY
    grown = FIRST_HALF_OPEN * (1 << min(breaker.failed_half_opens, 12))
    return min(grown, HALF_OPEN_EVERY)


def may_half_open(breaker: Breaker, *, now: datetime | None = None, hourly: bool = True) -> bool:
    """Whether the next real (half-open) call is allowed now. The call that opened the breaker
    counts as the first: otherwise an Ollama without ``/v1`` (every path 404) is tried again by
    the next run, seconds later. A little early (:data:`HALF_OPEN_SLACK`) is on time: a cron's
    runs reach this point seconds apart from one round to the next (a dev.to fetch comes first),
    and an hour that ended a second late would cost a whole round."""
    every = half_open_every(breaker, hourly=hourly)
    slack = min(every / 20, HALF_OPEN_SLACK)
    return _now(now) >= _last_real_attempt(breaker) + every - slack


def next_half_open(breaker: Breaker, *, hourly: bool = True) -> str:
    """When :func:`may_half_open` allows the next real attempt."""
    return iso(_last_real_attempt(breaker) + half_open_every(breaker, hourly=hourly))


def _last_real_attempt(breaker: Breaker) -> datetime:
    return parse_iso(breaker.half_open_at or breaker.since)


def mark_half_open(store: Store, comment: str, *, now: datetime | None = None) -> None:
    """Under the lock, before the half-open call: when it went, and that ``comment`` spends an
    attempt in this outage whatever comes of it (a process that dies in the call too; §16.6)."""
    state = store.load_provider_state()
    if state.breaker is not None:
        breaker = state.breaker.model_copy(update={"half_open_at": iso(_now(now))})
        spent = list(dict.fromkeys([*state.spent, comment]))
        store.save_provider_state(state.model_copy(update={"breaker": breaker, "spent": spent}))


def _setup(settings: Settings) -> tuple[str, str, str]:
    return settings.provider, settings.model, settings.base_url
