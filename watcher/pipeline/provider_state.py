"""The provider state: the cooldown after a 429 (SPEC §7.2) and the breaker (SPEC §13.1).

Both say "no model call now" for a reason the next run must honour. Every write is a
read-modify-write of the whole state under the pipeline lock, so a cooldown never erases a
breaker or the other way round. The state is the store's (``provider.json`` for the files).

A state whose timestamps do not parse is quarantined on read (the models validate them, SPEC
§13.5), and no cooldown lasts longer than :data:`MAX_COOLDOWN` from *now*, whatever the file or
the provider said.
"""

from __future__ import annotations

import math
from datetime import timedelta

from watcher.config import Settings
from watcher.errors import CooldownActive, LockBusy, StateError
from watcher.models import Breaker, ProviderState
from watcher.store import Store
from watcher.timeutil import iso, parse_iso, utcnow

HALF_OPEN_EVERY = timedelta(hours=1)
# The longest wait a Retry-After can impose (the same bound as providers.classify). Applied when
# read too: a cooldown written while the clock ran a year ahead would otherwise block runs for a
# year after the clock is fixed (SPEC §13.5).
MAX_COOLDOWN = timedelta(days=7)


# ---- cooldown ---------------------------------------------------------------------------------------


def read_cooldown(store: Store, state: ProviderState | None = None) -> CooldownActive | None:
    """The active cooldown, or ``None`` once it has passed; never more than 7 days from now."""
    state = store.load_provider_state() if state is None else state
    if state.cooldown_until is None:
        return None
    now = utcnow()
    until = parse_iso(state.cooldown_until)
    if until <= now:
        return None
    if until <= now + MAX_COOLDOWN:
        return CooldownActive(state.cooldown_until, state.reason or "rate limited")
    capped = iso(now + MAX_COOLDOWN)
    # Capping only in memory would be a target that moves with the clock: "now + 7 days" on
    # every read never ends. The first read that caps it writes the cap down, so it ends.
    _write_cap(store, state.cooldown_until, capped)
    return CooldownActive(capped, state.reason or "rate limited")


def _write_cap(store: Store, far: str, capped: str) -> None:
    """Replace a cooldown beyond the cap, if nobody changed it meanwhile; best effort.

    Readers (``status``, the gate before the lock) hold no lock, so this takes the pipeline lock
    without waiting: the provider state is a read-modify-write under it. Busy or not writable →
    the cap is still shown and applied in memory, and the next read tries again.
    """
    try:
        with store.pipeline_lock(timeout=0):
            state = store.load_provider_state()
            if state.cooldown_until == far:
                store.save_provider_state(state.model_copy(update={"cooldown_until": capped}))
    except (LockBusy, StateError):
        pass


def write_cooldown(store: Store, seconds: float, *, reason: str) -> str:
    """Record "no model call for ``seconds``" (at most 7 days; an infinite or NaN wait is 7 days)."""
    limit = MAX_COOLDOWN.total_seconds()
    wait = limit if not math.isfinite(seconds) else min(max(0.0, seconds), limit)
    until = iso(utcnow() + timedelta(seconds=wait))
    store.save_provider_state(store.load_provider_state().model_copy(
        update={"cooldown_until": until, "reason": reason}))
    return until


# ---- breaker ----------------------------------------------------------------------------------------


def breaker_of(settings: Settings, state: ProviderState) -> Breaker | None:
    """The open breaker *for this setup*. One opened for another provider, model or base URL
    does not hold: changing the setup is how a user says "try this instead"."""
    breaker = state.breaker
    if breaker is None or (breaker.provider, breaker.model, breaker.base_url) != _setup(settings):
        return None
    return breaker


def open_breaker(store: Store, settings: Settings, *, kind: str, message: str) -> Breaker:
    """Open (or keep open) the breaker for this setup; ``since`` stays that of the outage."""
    state = store.load_provider_state()
    old = breaker_of(settings, state)
    provider, model, base_url = _setup(settings)
    breaker = Breaker(kind=kind, message=message, since=old.since if old else iso(), provider=provider,
                      model=model, base_url=base_url, half_open_at=old.half_open_at if old else None)
    store.save_provider_state(state.model_copy(update={"breaker": breaker}))
    return breaker


def close_breaker(store: Store) -> None:
    state = store.load_provider_state()
    if state.breaker is not None:
        store.save_provider_state(state.model_copy(update={"breaker": None}))


def may_half_open(breaker: Breaker) -> bool:
    """One real attempt per hour where no probe can tell (no models endpoint, a bad request)."""
    return breaker.half_open_at is None or utcnow() - parse_iso(breaker.half_open_at) >= HALF_OPEN_EVERY


def mark_half_open(store: Store) -> None:
    state = store.load_provider_state()
    if state.breaker is not None:
        store.save_provider_state(state.model_copy(update={"breaker": state.breaker.model_copy(
            update={"half_open_at": iso()})}))


def _setup(settings: Settings) -> tuple[str, str, str]:
    return settings.provider, settings.model, settings.base_url
