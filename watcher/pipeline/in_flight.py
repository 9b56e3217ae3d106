"""Is a comment's open reservation a call in flight in another run, or an orphan? (SPEC §15.1)

The call lock answers, when it is the lock the reservation was made under: held, the call is out;
free, its process died and the attempt is closed as ``interrupted``. Each reservation is stamped
into its lock file as held (:meth:`watcher.store.CallLock.stamp`), so a lock file removed or
replaced during the call — a free lock that is another file — is never taken for "the caller
died": taken so, a second call for the comment would go out beside the first
(tests/test_call_lock_identity.py).

When the lock cannot tell, the reservation's own process can: its pid gone, or reused by a
process that started after the reservation (:meth:`watcher.store.Store.process_gone`), means it
died. Otherwise the comment is left as busy (``deferred``) until :data:`IN_FLIGHT_AT_MOST` after the
reservation: no call outlives its deadline (WATCHER_TIMEOUT, at most an hour), so a reservation
that old is an orphan even where its pid cannot be read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from watcher.models import Attempt, InboxRecord
from watcher.pipeline.batch import Batch
from watcher.state.drafts_model import Draft
from watcher.util.timeutil import iso, parse_iso

# The longest call WATCHER_TIMEOUT allows (watcher/config.py: 3600 s), and as much again for a
# process that was suspended or starved meanwhile.
IN_FLIGHT_AT_MOST = timedelta(hours=2)


@dataclass(frozen=True)
class InFlight:
    """An open reservation taken as a call in flight elsewhere: attempt ``n`` of pid ``pid``.

    ``until``: set when its call lock is not the one it was made under (removed or replaced) and
    only its process still running keeps it in flight: the latest time it is taken as such."""

    n: int
    pid: int
    until: str | None = None


def token(attempt: Attempt) -> str:
    """What names a reservation in its call-lock file: the fields the outcome's compare-and-swap
    compares (SPEC §13.5), so no other reservation of the comment has it."""
    return f"{attempt.pid} {attempt.n} {attempt.reserved_at}"


def draft_token(draft: Draft) -> str:
    """What names a reply draft's reservation in the comment's call-lock file (SPEC §16.5: a
    draft is reserved under the same call lock as an attempt, so it is stamped the same way)."""
    return f"draft {draft.pid} {draft.n} {draft.reserved_at}"


def in_flight(batch: Batch, record: InboxRecord) -> InFlight | None:
    """The record's open reservation (no agent lease) if it is a call in flight elsewhere."""
    last = record.attempts[-1] if record.attempts else None
    if last is None or last.outcome is not None or last.lease_until is not None:
        return None
    return _out(batch, record.comment.id, token(last), last.n, last.pid, last.reserved_at)


def draft_in_flight(batch: Batch, record: InboxRecord, draft: Draft) -> InFlight | None:
    """The record's open reply draft if its call is in flight elsewhere, as :func:`in_flight`."""
    return _out(batch, record.comment.id, draft_token(draft), draft.n, draft.pid, draft.reserved_at)


def _out(batch: Batch, cid: str, tok: str, n: int, pid: int, reserved_at: str) -> InFlight | None:
    state = batch.store.call_lock_state(cid, tok)
    if state == "held":
        return InFlight(n, pid)
    if state == "free":
        return None  # the lock it was made under, released by the kernel: its process died
    try:
        reserved = parse_iso(reserved_at)
    except ValueError:
        return None  # a stamp nobody can read bounds nothing: closed as interrupted
    if _too_old(reserved, batch.now()) or batch.store.process_gone(pid, reserved):
        return None
    return InFlight(n, pid, until=iso(reserved + IN_FLIGHT_AT_MOST))


def _too_old(reserved: datetime, now: datetime) -> bool:
    """Past the bound — or as far in the future, which no clock of a live run wrote."""
    return abs(now - reserved) >= IN_FLIGHT_AT_MOST
