"""One comment's record (SPEC §4.1) and every decision about it, as pure functions.

Each function takes a record and returns a new one (records are never mutated in place), or
judges one: :func:`state_of`, :func:`fingerprint`, and :func:`decide`, the pure core of SPEC §7
step 4. Nothing here touches a file; reading and writing records is the store's
(:mod:`watcher.store`).
"""

from __future__ import annotations

import hashlib
import os
from datetime import datetime, timedelta
from typing import Literal, NamedTuple

from watcher.commands.results import RunKind
from watcher.models import (
    CAP,
    COMMENT_ID_RE,
    Attempt,
    AttemptError,
    Comment,
    Edit,
    Gone,
    GoneKind,
    Grant,
    InboxRecord,
    Prompt,
    State,
    Usage,
    Verdict,
)
from watcher.util.timeutil import iso, parse_iso

RAW_LIMIT = 16 * 1024
# SPEC §15.5: what a person may grant a comment in all, so its cap never passes 3 + 6. A grant is
# a person's decision, but one typed in a loop (or by an agent told "--yes") must still end.
MAX_GRANTED = 6
# How long an agent's claim holds its attempt (SPEC §14); read at call time.
LEASE = timedelta(minutes=15)


class Fingerprint(NamedTuple):
    """What a command saw of a comment when it planned; compared again under the lock."""

    attempts: int
    last_outcome: str | None
    last_error: str | None
    has_verdict: bool


EMPTY = Fingerprint(0, None, None, False)


def is_valid_id(comment_id: str) -> bool:
    return COMMENT_ID_RE.fullmatch(comment_id) is not None


def text_sha256(text: str) -> str:
    """The hash each attempt and verdict records of the text it judged (SPEC §15.2)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# ---- pure decisions ----------------------------------------------------------------------------


def new_record(comment: Comment, prompt: Prompt) -> InboxRecord:
    return InboxRecord(comment=comment, prompt=prompt, cap=CAP)


def spent(record: InboxRecord) -> int:
    """The attempts that count toward the cap: all but those never sent (SPEC §16.3)."""
    return sum(1 for attempt in record.attempts if not attempt.not_sent)


def cap_of(record: InboxRecord) -> int:
    """3 plus what the user granted (SPEC §13.2); the file's ``cap`` field is not trusted."""
    return CAP + sum(g.n for g in record.grants)


def grant_refusal(record: InboxRecord, n: int) -> str | None:
    """Why ``n`` more attempts cannot be granted to ``record``, naming what applies instead;
    ``None`` when they can (SPEC §13.2, §15.5)."""
    cid, state = record.comment.id, state_of(record)
    if state in ("deleted", "hidden"):
        return f"{cid} is {state} on dev.to: there is nothing left to judge or reply to"
    if state == "done":
        return f"{cid} already has a verdict: nothing to try again"
    if state == "pending":
        return f"{cid} has not been tried yet: `watcher scan` makes its first attempt"
    if state == "baseline":
        # Never called, so no attempt was spent: a grant would only raise a cap nothing uses.
        return (
            f"{cid} is baseline (older than the first scan's backlog window): it was never sent "
            "to the model and has all its attempts — "
            f"`watcher scan --since {record.comment.created_at[:10]}` queues it"
        )
    if state == "answered":
        return (
            f"you had already replied to {cid} on dev.to before it was checked, so it was never "
            "sent to the model and needs no attempt — if it still needs you, "
            f"`watcher mark {cid} open` reopens it (`watcher show {cid}` has its text)"
        )
    granted = sum(g.n for g in record.grants)
    left = MAX_GRANTED - granted
    if n > left:
        total = (
            f"a comment's attempts stop at {CAP} + {MAX_GRANTED} granted "
            f"(a cap of {CAP + MAX_GRANTED})"
        )
        if left <= 0:
            return f"{cid} has been granted all it can be: {total}"
        return (
            f"{cid} can be granted {left} more at most ({granted} granted already; {total}): "
            f"--attempts {left}"
        )
    return None


def grant(record: InboxRecord, n: int, *, at: str | None = None) -> InboxRecord:
    """``n`` more attempts for a comment without a verdict (the person's decision, SPEC §13.2).

    Raises ``ValueError`` where :func:`grant_refusal` refuses (the command asked it first)."""
    refusal = grant_refusal(record, n)
    if refusal is not None:
        raise ValueError(refusal)
    grants = [*record.grants, Grant(at=at or iso(), n=n)]
    return record.model_copy(update={"grants": grants, "cap": CAP + sum(g.n for g in grants)})


def state_of(record: InboxRecord) -> State:
    if record.attempts and record.attempts[-1].outcome is None:
        # Before gone: a comment deleted while its attempt was reserved still has that attempt to
        # close (its outcome lands, or the next recheck records it interrupted, SPEC §13.6); as
        # "deleted" no recheck would plan it and it stayed reserved for good (the soak of
        # tests/reliability/test_rel_soak.py, which deletes comments while batches run).
        return "reserved"
    if record.gone is not None:
        return record.gone.kind  # gone from dev.to wins over everything else: never called again
    if record.verdict is not None:
        return "done"
    edited = awaits_first_attempt(record) and bool(record.attempts)
    if not record.attempts or edited:
        if record.replied_at is not None:
            return "answered"
        if record.baseline:
            return "baseline"
        # An edit keeps the comment's lifetime budget (SPEC §15.2): with none left, its old verdict
        # stays on show (in `edits`) until `watcher grant` gives the new text a try. With no old
        # verdict either, it is what it was: all attempts spent without a verdict (§15.3 names it).
        if not edited or spent(record) < cap_of(record):
            return "pending"
        return "edited" if record.edits[-1].verdict is not None else "exhausted"
    if record.attempts[-1].outcome is None:
        return "reserved"
    if spent(record) >= cap_of(record):
        return "exhausted"
    return "failed"


def awaits_first_attempt(record: InboxRecord) -> bool:
    """Whether the comment's current text has had no attempt: never tried, or edited since (an
    edit that goes to the model, SPEC §15.2) and not tried since."""
    if not record.edits:
        return not record.attempts
    last = record.edits[-1]
    return last.judged and len(record.attempts) == last.attempts


def edit_on_hold(record: InboxRecord) -> bool:
    """An edit seen after the author replied or marked it: recorded and shown, never called."""
    return bool(record.edits) and not record.edits[-1].judged and record.verdict is None


def apply_edit(
    record: InboxRecord, text: str, prompt: Prompt, *, judged: bool, at: str | None = None
) -> InboxRecord:
    """The comment's new text (SPEC §15.2): the old text and its verdict move to ``edits``. With
    ``judged`` the new text waits for its first attempt (the verdict goes); without (the author
    replied or marked it) the verdict the person acted on stays, and nothing is called."""
    old = record.comment.text
    ok = next((a for a in reversed(record.attempts) if a.outcome == "ok"), None)
    edit = Edit(
        seen_at=at or iso(),
        text=old,
        text_sha256=text_sha256(old),
        verdict=record.verdict,
        verdict_at=ok.finished_at if ok is not None and record.verdict is not None else None,
        attempts=len(record.attempts),
        judged=judged,
    )
    update: dict[str, object] = {
        "comment": record.comment.model_copy(update={"text": text}),
        "prompt": prompt,
        "edits": [*record.edits, edit],
    }
    if judged:
        update.update(verdict=None, verdict_text_sha256=None)
    return record.model_copy(update=update)


def mark_gone(
    record: InboxRecord, kind: GoneKind, why: str, *, at: str | None = None
) -> InboxRecord:
    """Deleted or hidden on dev.to (SPEC §15.2): kept on disk, never called again. A comment already
    gone keeps when it was first seen gone."""
    if record.gone is not None and record.gone.kind == kind:
        return record
    return record.model_copy(update={"gone": Gone(kind=kind, seen_at=at or iso(), why=why)})


def fingerprint(record: InboxRecord | None) -> Fingerprint:
    if record is None:
        return EMPTY
    last = record.attempts[-1] if record.attempts else None
    return Fingerprint(
        attempts=len(record.attempts),
        last_outcome=last.outcome if last else None,
        last_error=last.error.kind if last and last.error else None,
        has_verdict=record.verdict is not None,
    )


def reserve(
    record: InboxRecord,
    *,
    command: str,
    entrypoint: str,
    provider: str,
    model: str,
    pid: int | None = None,
    lease_until: str | None = None,
) -> InboxRecord:
    """Append attempt n+1 with ``outcome: null``. Saved before the call, it *is* the budget.

    ``lease_until``: an agent's claim (SPEC §14) — until then the attempt is in flight elsewhere."""
    if record.verdict is not None or record.gone is not None or spent(record) >= cap_of(record):
        raise ValueError(f"comment {record.comment.id}: no attempt left to reserve")
    if record.attempts and record.attempts[-1].outcome is None:
        # An open reservation is either in flight or an orphan; stacking a second one on it
        # would leave an attempt whose outcome can never be recorded. Close it first.
        raise ValueError(
            f"comment {record.comment.id}: attempt {len(record.attempts)} is still reserved"
        )
    attempt = Attempt(
        text_sha256=text_sha256(record.comment.text),
        n=len(record.attempts) + 1,
        reserved_at=iso(),
        command=command,  # type: ignore[arg-type]
        entrypoint=entrypoint,  # type: ignore[arg-type]
        pid=os.getpid() if pid is None else pid,
        provider=provider,
        model=model,
        lease_until=lease_until,
    )
    # Shallow copies: records are never mutated in place, so old and new may share sub-models.
    return record.model_copy(update={"attempts": [*record.attempts, attempt]})


def finish(
    record: InboxRecord,
    *,
    verdict: Verdict | None,
    error: AttemptError | None,
    raw: str | None = None,
    usage: Usage | None = None,
    duration_ms: int | None = None,
) -> InboxRecord:
    """Record the outcome of the reserved last attempt: a verdict or one classified error."""
    if (verdict is None) == (error is None):
        raise ValueError("finish() takes exactly one of verdict or error")
    last = _reserved_last(record)
    done = last.model_copy(
        update={
            "outcome": "ok" if verdict is not None else "error",
            "finished_at": iso(),
            "error": error,
            "raw": _first_bytes(raw, RAW_LIMIT) if raw is not None else None,
            "usage": usage,
            "duration_ms": duration_ms,
        }
    )
    return record.model_copy(
        update={
            "attempts": [*record.attempts[:-1], done],
            "verdict": verdict,
            "verdict_text_sha256": last.text_sha256 if verdict is not None else None,
        }
    )


def _first_bytes(text: str, limit: int) -> str:
    """At most ``limit`` bytes of UTF-8 (SPEC: "first 16 KiB"), never a split character."""
    data = text.encode("utf-8", "surrogatepass")
    return text if len(data) <= limit else data[:limit].decode("utf-8", "ignore")


def mark_interrupted(record: InboxRecord, *, message: str | None = None) -> InboxRecord:
    """Close an orphaned reservation: its process died (we hold the lock, so nothing is in flight),
    or — with ``message`` — the person stopped the run during the call (SPEC §13.6)."""
    last = _reserved_last(record)
    message = message or (
        f"attempt {last.n} was reserved by pid {last.pid} ({last.entrypoint} {last.command}) at "
        f"{last.reserved_at} and never finished: the process died or could not save; "
        "the attempt stays spent"
    )
    return finish(record, verdict=None, error=AttemptError(kind="interrupted", message=message))


def still_reserved(record: InboxRecord, attempt: Attempt) -> bool:
    """Whether ``attempt`` (reserved by this run) is still the record's open last attempt: the
    compare of the outcome's compare-and-swap (SPEC §13.5)."""
    if not record.attempts:
        return False
    last = record.attempts[-1]
    return last.outcome is None and (last.n, last.reserved_at, last.pid) == (
        attempt.n,
        attempt.reserved_at,
        attempt.pid,
    )


def lease_active(attempt: Attempt, now: datetime) -> bool:
    """Whether ``attempt`` is an agent's open claim still in flight at ``now`` (SPEC §14).

    A lease more than one :data:`LEASE` ahead of now does not hold: it was taken while the clock ran
    ahead, and honouring it would keep the comment deferred for as long as the clock was off
    (the same rule as a cooldown's cap, SPEC §13.5). Closed as interrupted, it stays counted."""
    if attempt.outcome is not None or attempt.lease_until is None:
        return False
    return now < parse_iso(attempt.lease_until) <= now + LEASE


def open_lease(record: InboxRecord) -> str | None:
    """The lease of the record's open last attempt (an agent's claim, SPEC §14), else ``None``."""
    last = record.attempts[-1] if record.attempts else None
    return last.lease_until if last is not None and last.outcome is None else None


def verdict_by(record: InboxRecord) -> str | None:
    """The provider of the attempt that gave the saved verdict (``agent`` for an agent's submit)."""
    if record.verdict is None:
        return None
    return next((a.provider for a in reversed(record.attempts) if a.outcome == "ok"), None)


def _reserved_last(record: InboxRecord) -> Attempt:
    if not record.attempts or record.attempts[-1].outcome is not None:
        raise ValueError(f"comment {record.comment.id}: last attempt is not reserved")
    return record.attempts[-1]


# ---- the decision under the lock (SPEC §7 step 4) ------------------------------------------------

# What to do with one comment under the lock: make the call, or the outcome it gets instead.
Decision = Literal["call", "skipped", "interrupted", "deferred", "exhausted"]


def decide(
    command: RunKind,
    record: InboxRecord,
    planned: Fingerprint,
    *,
    now: datetime,
    seen_attempts: int = 0,
    call_in_flight: bool = False,
) -> Decision:
    """What to do with a comment now that we hold the lock. The order is SPEC §7 step 4.

    ``now`` judges an agent's lease (SPEC §14). ``seen_attempts`` is seen.json's count: the
    attempts that count are never lower than it, so a record restored from an older copy cannot
    reopen a spent budget (SPEC §4.1, §13.5). ``call_in_flight``: another run holds the comment's
    call lock (SPEC §15.1). ``claim`` picks like scan and recheck together."""
    if record.attempts and record.attempts[-1].outcome is None:
        # First, even for a comment gone from dev.to: an open reservation is closed, never left.
        if lease_active(record.attempts[-1], now) or call_in_flight:
            # An agent's lease runs, or a run's call is out (its call lock is held): in flight.
            return "deferred"
        # No lease runs and nobody holds its call lock (the kernel dropped it): its process died.
        return "interrupted"
    if record.verdict is not None or record.gone is not None or edit_on_hold(record):
        return "skipped"
    if fingerprint(record) != planned:
        return "deferred"
    if max(spent(record), seen_attempts) >= cap_of(record):
        return "exhausted"
    if awaits_first_attempt(record) and (
        command == "recheck" or record.baseline or record.replied_at is not None
    ):
        # Never attempted (or edited since): the first attempt is scan's; a baseline or answered
        # comment gets none.
        return "skipped"
    return "call"
