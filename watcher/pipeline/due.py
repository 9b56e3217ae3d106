"""When a batch may call a comment again (SPEC §16.3, budget fairness).

An attempt that failed on the provider's side — a 5xx, an overload, a timeout, a connection
dropped after sending — says nothing about the comment: calling it again at once, as a cron round's
``recheck`` does seconds after its ``scan``, spends a second attempt on the same outage. So no
batch calls it again sooner than :data:`RETRY_AFTER` after that attempt finished; ``recheck ID``
naming it is the person's choice and may. A failure in the model's answer (malformed, invalid,
truncated, refused) may be rechecked at once. Light on purpose: ``show`` and ``inbox`` read it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from watcher.models import InboxRecord
from watcher.util.timeutil import iso, parse_iso

# The provider failed, not the comment (SPEC §13.1's transient kinds).
PROVIDER_SIDE_KINDS = frozenset({"overloaded", "server_error", "timeout", "network"})
RETRY_AFTER = timedelta(minutes=10)


def next_due(record: InboxRecord) -> str | None:
    """When a batch may call ``record`` again after a provider-side failure of its last attempt;
    ``None`` when no such wait applies (a verdict, an answer's failure, no attempt)."""
    if record.verdict is not None or not record.attempts:
        return None
    last = record.attempts[-1]
    if last.error is None or last.finished_at is None:
        return None
    if last.error.kind not in PROVIDER_SIDE_KINDS:
        return None
    return iso(parse_iso(last.finished_at) + RETRY_AFTER)


def due_later(record: InboxRecord, now: datetime) -> str | None:
    """:func:`next_due` when it is still ahead of ``now``, else ``None`` (it may be called)."""
    due = next_due(record)
    return due if due is not None and parse_iso(due) > now else None
