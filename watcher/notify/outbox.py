"""The durable outbox (SPEC §16.1): what happens to a message, from its file to each target's fate.

A message is written — durably, §4's write (:class:`watcher.store.outbox.OutboxFiles`) — with its
news and its targets *before* anything is sent. Each target then has one fate:

- ``accepted_at``: the target took it (HTTP 2xx, SMTP 250), recorded the moment it happened;
- failures (``attempts``, ``first_failed_at``, ``last_error`` — redacted) while it keeps failing,
  retried on each later round;
- ``gave_up_at``: :data:`GIVE_UP_AFTER` after its first failure — said once on stderr, shown by
  ``status``.

So a crash between a target's acceptance and its record sends that one message to that one target
again (the same id in its body); it can never mark a target delivered that did not accept, nor
lose news: news is in a file before any send. A message's news keys are read back before a new
message is made, so news already in a message is never put in another.

Every change happens under ``locks/outbox.lock``: two rounds at once never send one message twice.
A finished message (every target accepted or given up) is kept for :data:`KEEP_DONE` — long past
the round after a crash, the only time its keys matter — and the newest one always (``status``'s
last delivery).
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from watcher.notify.models import OutboxMessage, TargetFate
from watcher.store.outbox import OutboxFiles
from watcher.util.timeutil import iso, parse_iso

GIVE_UP_AFTER = timedelta(hours=24)
KEEP_DONE = timedelta(days=7)


def new_id(now: datetime) -> str:
    """Sortable by time: seconds since the epoch in hex, then 6 random hex digits."""
    return f"{int(now.timestamp()):x}{secrets.token_hex(3)}"


def prune(files: OutboxFiles, messages: list[OutboxMessage], now: datetime) -> list[OutboxMessage]:
    """Remove finished messages older than :data:`KEEP_DONE` but the newest; return the rest."""
    newest = max((m for m in messages if m.done), key=lambda m: m.created_at, default=None)
    kept = []
    for message in messages:
        old = now - parse_iso(message.created_at) > KEEP_DONE
        if message.done and old and message is not newest:
            files.remove(message)
        else:
            kept.append(message)
    return kept


def accepted(fate: TargetFate, now: datetime) -> TargetFate:
    return fate.model_copy(update={"accepted_at": iso(now), "last_error": None})


def failed(fate: TargetFate, now: datetime, error: str) -> TargetFate:
    """One more failure; given up once the first is :data:`GIVE_UP_AFTER` old."""
    first = fate.first_failed_at or iso(now)
    gave_up = iso(now) if now - parse_iso(first) >= GIVE_UP_AFTER else None
    return fate.model_copy(
        update={
            "attempts": fate.attempts + 1,
            "first_failed_at": first,
            "last_error": error,
            "gave_up_at": gave_up,
        }
    )
