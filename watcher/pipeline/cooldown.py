"""SPEC §7.2: a provider cooldown in ``provider.json`` after a 429 with ``Retry-After``."""

from __future__ import annotations

from datetime import timedelta

from watcher.config import Settings
from watcher.durable import read_model, write_model
from watcher.errors import CooldownActive
from watcher.models import ProviderState
from watcher.timeutil import iso, parse_iso, utcnow


def read_cooldown(settings: Settings) -> CooldownActive | None:
    """The active cooldown, or ``None`` once it has passed."""
    paths = settings.paths
    state = read_model(paths.provider_state, ProviderState, quarantine_dir=paths.quarantine)
    if state is None or state.cooldown_until is None:
        return None
    if parse_iso(state.cooldown_until) <= utcnow():
        return None
    return CooldownActive(state.cooldown_until, state.reason or "rate limited")


def write_cooldown(settings: Settings, seconds: float, *, reason: str) -> str:
    until = iso(utcnow() + timedelta(seconds=max(0.0, seconds)))
    write_model(settings.paths.provider_state, ProviderState(cooldown_until=until, reason=reason))
    return until
