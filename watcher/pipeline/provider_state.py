"""``provider.json``: the cooldown after a 429 (SPEC §7.2) and the breaker (SPEC §13.1).

Both say "no model call now" for a reason the next run must honour. Every write is a
read-modify-write of the whole file under the pipeline lock, so a cooldown never erases a
breaker or the other way round.
"""

from __future__ import annotations

from datetime import timedelta

from watcher.config import Settings
from watcher.durable import read_model, write_model
from watcher.errors import CooldownActive
from watcher.models import Breaker, ProviderState
from watcher.timeutil import iso, parse_iso, utcnow

HALF_OPEN_EVERY = timedelta(hours=1)


def load(settings: Settings) -> ProviderState:
    paths = settings.paths
    return read_model(paths.provider_state, ProviderState, quarantine_dir=paths.quarantine) or ProviderState()


def _save(settings: Settings, state: ProviderState) -> None:
    write_model(settings.paths.provider_state, state)


# ---- cooldown ---------------------------------------------------------------------------------------


def read_cooldown(settings: Settings, state: ProviderState | None = None) -> CooldownActive | None:
    """The active cooldown, or ``None`` once it has passed."""
    state = load(settings) if state is None else state
    if state.cooldown_until is None or parse_iso(state.cooldown_until) <= utcnow():
        return None
    return CooldownActive(state.cooldown_until, state.reason or "rate limited")


def write_cooldown(settings: Settings, seconds: float, *, reason: str) -> str:
    until = iso(utcnow() + timedelta(seconds=max(0.0, seconds)))
    _save(settings, load(settings).model_copy(update={"cooldown_until": until, "reason": reason}))
    return until


# ---- breaker ----------------------------------------------------------------------------------------


def breaker_of(settings: Settings, state: ProviderState) -> Breaker | None:
    """The open breaker *for this setup*. One opened for another provider, model or base URL
    does not hold: changing the setup is how a user says "try this instead"."""
    breaker = state.breaker
    if breaker is None or (breaker.provider, breaker.model, breaker.base_url) != _setup(settings):
        return None
    return breaker


def open_breaker(settings: Settings, *, kind: str, message: str) -> Breaker:
    """Open (or keep open) the breaker for this setup; ``since`` stays that of the outage."""
    state = load(settings)
    old = breaker_of(settings, state)
    provider, model, base_url = _setup(settings)
    breaker = Breaker(kind=kind, message=message, since=old.since if old else iso(), provider=provider,
                      model=model, base_url=base_url, half_open_at=old.half_open_at if old else None)
    _save(settings, state.model_copy(update={"breaker": breaker}))
    return breaker


def close_breaker(settings: Settings) -> None:
    state = load(settings)
    if state.breaker is not None:
        _save(settings, state.model_copy(update={"breaker": None}))


def may_half_open(breaker: Breaker) -> bool:
    """One real attempt per hour where no probe can tell (no models endpoint, a bad request)."""
    return breaker.half_open_at is None or utcnow() - parse_iso(breaker.half_open_at) >= HALF_OPEN_EVERY


def mark_half_open(settings: Settings) -> None:
    state = load(settings)
    if state.breaker is not None:
        _save(settings, state.model_copy(update={"breaker": state.breaker.model_copy(
            update={"half_open_at": iso()})}))


def _setup(settings: Settings) -> tuple[str, str, str]:
    return settings.provider, settings.model, settings.base_url
