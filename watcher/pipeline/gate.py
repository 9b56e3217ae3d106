"""May this run call the model, and when must it stop? (SPEC §6 table, §7.2, §13.1)

A broken setup (a down server, a wrong URL, a retired model, a revoked key) fails every comment
the same way, so it must not be paid for comment by comment:

- a setup kind (or two transient failures in a row) stops the batch at once and opens the
  *breaker* in provider.json;
- while the breaker is open for this setup, a run first makes a free *probe* of the provider's
  models endpoint (no attempt reserved, no tokens) and makes no model call until it passes;
- where no probe can tell (no models endpoint; a ``bad_request``), one real attempt is allowed
  per hour (*half-open*).

So an outage costs at most one attempt, and every run during it exits non-zero and says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from watcher.errors import (
    ProviderSetup,
    ProviderUnavailable,
    QuotaExhausted,
    RateLimited,
    WatcherError,
)
from watcher.models import AttemptError
from watcher.pipeline import provider_state
from watcher.pipeline.batch import Batch

# SPEC §6 table, "stops the batch" column.
STOP_AT_ONCE = frozenset({"rate_limited", "quota_exhausted", "auth", "model_not_found", "bad_request", "unreachable"})
# Worth another try later, but two in a row in one batch is an outage, not bad luck.
TRANSIENT_KINDS = frozenset({"overloaded", "server_error", "timeout", "network"})
TRANSIENT_STREAK = 2
# The user must change something (exit 2); the rest should pass by waiting (exit 3).
FIX_KINDS = frozenset({"auth", "model_not_found", "bad_request"})

GateMode = Literal["go", "half_open", "closed"]


@dataclass(frozen=True)
class Gate:
    """What the run may do with the model. ``error`` is why it may not (``closed``)."""

    mode: GateMode
    error: WatcherError | None = None
    stop: str = ""  # the summary's "stopped" when closed: cooldown | breaker
    close_breaker: bool = False  # a probe passed: close it under the lock before the first call


GO = Gate("go")


def evaluate(batch: Batch) -> Gate:
    """Decide before the lock (the probe is network). Never spends an attempt."""
    settings = batch.settings
    state = batch.store.load_provider_state()
    cooldown = provider_state.read_cooldown(batch.store, state)
    if cooldown is not None:
        return Gate("closed", cooldown, "cooldown")
    breaker = provider_state.breaker_of(settings, state)
    if breaker is None:
        # A breaker left for another setup is closed by the first save under the lock.
        return Gate("go", close_breaker=state.breaker is not None)
    if breaker.kind != "bad_request":  # a bad request is in the request body: no probe can see it
        probe = batch.provider().probe()
        if probe.ok:
            batch.notice(f"note: the provider answers again (the breaker opened {breaker.since} is closed)")
            return Gate("go", close_breaker=True)
        if probe.kind != "no_models_endpoint":
            return _closed(breaker.since, probe.kind or breaker.kind, probe.message)
    if provider_state.may_half_open(breaker):
        return Gate("half_open")
    return _closed(breaker.since, breaker.kind, f"{breaker.message} (one real attempt per hour is allowed where "
                   "no probe can tell; the next one is due an hour after the last)")


def _closed(since: str, kind: str, reason: str) -> Gate:
    message = f"provider unavailable since {since}: {reason} — no attempts spent this run"
    return Gate("closed", setup_error(kind, message), "breaker")


def setup_error(kind: str, message: str) -> WatcherError:
    """A failed setup as the run's error: exit 2 for what the user must fix, else exit 3 (wait)."""
    return ProviderSetup(message) if kind in FIX_KINDS else ProviderUnavailable(message)


def stops(error: AttemptError, streak: int) -> bool:
    """Whether this outcome stops the batch; ``streak`` counts transient failures in a row so far."""
    return error.kind in STOP_AT_ONCE or (error.kind in TRANSIENT_KINDS and streak >= TRANSIENT_STREAK)


def stop_for(batch: Batch, error: AttemptError) -> tuple[str, WatcherError]:
    """Write what the next run must honour (cooldown, breaker) and name the stop and its error.

    Called before the outcome is saved: a save that fails must not lose the cooldown or the
    breaker, or the next run seconds later would call again.
    """
    settings, kind, said = batch.settings, error.kind, error.message
    if kind == "quota_exhausted":
        return kind, QuotaExhausted(f"provider quota exhausted: {said} — check your plan or spend limit")
    if kind == "rate_limited":
        until = None
        if error.retry_after_s is not None:
            until = provider_state.write_cooldown(batch.store, error.retry_after_s, reason=f"rate_limited: {said}")
        wait = f"; no model calls until {until}" if until else "; wait a minute before the next run"
        return kind, RateLimited(f"provider rate limit (HTTP 429){wait}")
    provider_state.open_breaker(batch.store, settings, kind=kind, message=said)
    setup = f"{settings.provider} model {settings.model} at {settings.shown_base_url}"
    if kind == "auth":
        return kind, ProviderSetup(f"the provider rejected the API key ({said}) — check WATCHER_API_KEY; "
                                   "no further attempts until it is fixed")
    if kind == "model_not_found":
        return kind, ProviderSetup(f"{setup}: the model does not exist ({said}) — check WATCHER_MODEL "
                                   "(`watcher check` lists what the server has)")
    if kind == "bad_request":
        return kind, ProviderSetup(f"{setup}: the provider refused the request ({said}) — check WATCHER_MODEL "
                                   "and WATCHER_BASE_URL")
    if kind == "unreachable":
        return kind, ProviderUnavailable(f"provider unreachable: {said} — the next run checks it for free "
                                         "before spending an attempt")
    return kind, ProviderUnavailable(f"the provider failed {TRANSIENT_STREAK} times in a row (last: {kind}: {said}); "
                                     "stopped to save attempts — the next run checks it for free first")
