"""A comment's reply drafts (SPEC §16.5), as pure functions over its record, like
:mod:`watcher.state.records` for attempts: nothing here touches a file.

The drafts are a budget of their own: :data:`DRAFT_CAP` per comment in its lifetime, every draft
reserved counting whatever came of it (an error, an interruption), and none of them touching the
verdict's attempts (``attempts``, ``grants``: never read or written here).
"""

from __future__ import annotations

import os

from watcher.models import InboxRecord
from watcher.state.drafts_model import Draft, DraftError
from watcher.util.timeutil import iso

DRAFT_CAP = 3
# The error text of a failed draft as kept on the record (its raw body is not kept: the draft's
# text is the product, and the attempt's raw body already shows a provider's error format).
_MESSAGE_LIMIT = 2000


def drafts_spent(record: InboxRecord) -> int:
    """Drafts that count toward :data:`DRAFT_CAP`: every one ever reserved."""
    return len(record.drafts)


def open_draft(record: InboxRecord) -> Draft | None:
    """The record's last draft if it is still reserved (in flight, or its process died)."""
    last = record.drafts[-1] if record.drafts else None
    return last if last is not None and last.outcome is None else None


def newest_text(record: InboxRecord) -> Draft | None:
    """The newest draft that has a text (what ``show`` prints and ``--copy`` copies)."""
    return next((d for d in reversed(record.drafts) if d.text is not None), None)


def refusal(record: InboxRecord) -> str | None:
    """Why no draft may be reserved for ``record`` now (``None``: one may)."""
    cid = record.comment.id
    if record.gone is not None:
        return f"{cid} is {record.gone.kind} on dev.to: there is nothing to reply to"
    if drafts_spent(record) >= DRAFT_CAP:
        newest = newest_text(record)
        where = (
            f"the newest, draft {newest.n}, is in `watcher show {cid}`: edit it and post it on "
            f"dev.to (`watcher open {cid}`)"
            if newest is not None
            else f"none of them has a text: write the reply on dev.to (`watcher open {cid}`)"
        )
        return f"{cid} has had all its {DRAFT_CAP} drafts, a budget of their own; {where}"
    return None


def reserve_draft(
    record: InboxRecord, *, entrypoint: str, provider: str, model: str, at: str | None = None
) -> InboxRecord:
    """Append draft n+1 with ``outcome: null``: saved before the call, it *is* the budget.

    Raises ``ValueError`` where :func:`refusal` refuses, or while the last draft is reserved."""
    why = refusal(record)
    if why is not None:
        raise ValueError(why)
    if open_draft(record) is not None:
        raise ValueError(f"comment {record.comment.id}: draft {len(record.drafts)} is reserved")
    draft = Draft(
        n=len(record.drafts) + 1,
        reserved_at=at or iso(),
        entrypoint=entrypoint,  # type: ignore[arg-type]
        pid=os.getpid(),
        provider=provider,
        model=model,
    )
    return record.model_copy(update={"drafts": [*record.drafts, draft]})


def still_reserved(record: InboxRecord, draft: Draft) -> bool:
    """Whether ``draft`` (reserved by this run) is still the record's open last draft: the compare
    of the outcome's compare-and-swap (SPEC §13.5)."""
    last = open_draft(record)
    return last is not None and (last.n, last.reserved_at, last.pid) == (
        draft.n,
        draft.reserved_at,
        draft.pid,
    )


def finish_draft(
    record: InboxRecord,
    *,
    text: str | None,
    error: DraftError | None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    duration_ms: int | None = None,
    at: str | None = None,
) -> InboxRecord:
    """Record the outcome of the reserved last draft: its text, or why it has none."""
    if (text is None) == (error is None):
        raise ValueError("finish_draft() takes exactly one of text or error")
    last = open_draft(record)
    if last is None:
        raise ValueError(f"comment {record.comment.id}: last draft is not reserved")
    if error is not None and len(error.message) > _MESSAGE_LIMIT:
        error = error.model_copy(update={"message": error.message[: _MESSAGE_LIMIT - 1] + "…"})
    done = last.model_copy(
        update={
            "outcome": "ok" if text is not None else "error",
            "finished_at": at or iso(),
            "text": text,
            "error": error,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "duration_ms": duration_ms,
        }
    )
    return record.model_copy(update={"drafts": [*record.drafts[:-1], done]})


def interrupt_draft(
    record: InboxRecord, *, message: str | None = None, at: str | None = None
) -> InboxRecord:
    """Close an orphaned draft reservation (its process died: nobody holds its call lock), or —
    with ``message`` — one the person stopped during the call. It stays counted (SPEC §7 step
    4.3, §13.6)."""
    last = open_draft(record)
    if last is None:
        raise ValueError(f"comment {record.comment.id}: last draft is not reserved")
    message = message or (
        f"draft {last.n} was reserved by pid {last.pid} ({last.entrypoint}) at {last.reserved_at} "
        "and never finished: the process died or could not save; the draft stays counted"
    )
    error = DraftError(kind="interrupted", message=message)
    return finish_draft(record, text=None, error=error, at=at)
