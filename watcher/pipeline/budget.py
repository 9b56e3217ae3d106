"""``WATCHER_MONTHLY_TOKENS`` (SPEC §16.4): a call goes out only if its worst case fits in what is
left of the month.

The check is made in the same hold of the pipeline lock as the reservation it admits (SPEC §15.1:
lock, re-read, cap check, **token check**, durable reservation, unlock), so two runs at once cannot
both spend the last tokens: the second one's check already counts the first one's reservation.
What it reads is the month's tally (:mod:`watcher.state.tokens`, ``tokens.json``), one small file,
kept by the runs that have a budget. A run without one removes it at each of its reservations (one
``lstat`` when there is none: a durable write per call would cost every user, budget or not,
``python bench/run.py --only per-call``), so a tally that exists has seen every call since it was
built; setting a budget mid-month, or in only one of two configurations (cron's env file, an MCP
client's env), then counts every call from the attempts again:

- :func:`admit`, before the reservation is written: every open entry whose call is over is settled
  (its recorded usage, read from its record), then the worst case of this call must fit, and is
  entered as open — *before* the reservation, so a crash between the two counts a call that was
  never reserved (settled as nothing by the next check), never the other way round;
- an open entry stays at its worst case while its call lock is held (the call is in flight, in this
  run or another); once the lock is free its outcome is on disk, or its process died before
  recording any usage and it counts its worst case for good (SPEC §16.4), as does an attempt closed
  without usage (``interrupted``, an error the provider reported no usage for);
- several calls in flight at once (``--parallel``) are each an open entry at its worst case.

Where there is no tally yet (the first run of this release, or a tally quarantined), it is built
from the month's attempts before the batch's first hold (:func:`prepare`), as ``watcher usage``
reads them; a tally of an earlier month starts the month from nothing.

Only providers that spend tokens count: ``offline`` makes no request, and with ``agent`` (SPEC §14)
the agent in the loop gives the verdicts with its own model, on its own plan — watcher makes no
provider call, sees no usage, and the tokens are not watcher's to limit, so ``claim`` and ``submit``
are outside the budget (each claim is still one of the comment's 3 attempts).

A reply draft (SPEC §16.5) is a provider call too, with a key of its own kind (``draft:<id>/<n>``,
:func:`key_of`): :mod:`watcher.pipeline.drafting` calls :func:`prepare_tally` before the lock;
then, under the lock and the comment's call lock, :func:`admit_tokens` before the draft's
reservation; :func:`settle` with 0 if it was not written, with the reported usage once the outcome
is durable. Left open, its entry is settled as an attempt's is, from the draft in the record: its
recorded usage, else its worst case once its call lock is free. Another kind of call counts its
worst case until its own code settles it.
"""

from __future__ import annotations

import contextlib

from watcher.commands.results import ItemResult
from watcher.config import Settings
from watcher.errors import BudgetReached, CorruptState, LockBusy, StateError
from watcher.models import InboxRecord
from watcher.pipeline.batch import Batch
from watcher.pipeline.outcomes import state_stop
from watcher.providers.drafts import DRAFT_MAX_TOKENS
from watcher.providers.registry import PROVIDERS
from watcher.state.tokens import (
    TokenTally,
    draft_used,
    key_of,
    next_month,
    parse_key,
    used_by,
    worst_case,
)
from watcher.store import CallLock, Store
from watcher.util.timeutil import utcnow

# The kind of a reply draft's entry in the tally (:func:`watcher.state.tokens.key_of`).
DRAFT = "draft"


def applies(settings: Settings) -> bool:
    """Whether this setup's calls spend provider tokens (not ``offline``, not ``agent``)."""
    return spends(settings.provider)


def spends(provider: str) -> bool:
    """Whether an attempt of ``provider`` spent provider tokens; one not known here is counted."""
    spec = PROVIDERS.get(provider)
    return spec is None or spec.is_remote


def prepare(batch: Batch) -> None:
    """Before the batch's first hold, where a budget is set: :func:`prepare_tally`. A tally that
    could not be read (quarantined, then built again) or written fails the run (exit 5) without
    stopping the batch; :func:`admit` meets what is left of the trouble under the lock, and stops
    the batch with it."""
    if not batch.run.dry_run and applies(batch.settings) and batch.settings.monthly_tokens:
        failed = prepare_tally(batch.store)
        if failed is not None:
            batch.fail(failed)


def prepare_tally(store: Store) -> StateError | None:
    """Before taking the lock to reserve: where there is no tally, build it from this month's
    attempts (a read of the month's inbox files, which must not happen under the lock) and write
    it, unless another run wrote one meanwhile. Returns what went wrong, if anything (a busy lock is
    left for the caller's own hold to meet)."""
    failed: StateError | None = None
    try:
        if store.load_token_tally() is not None:
            return None
    except CorruptState as exc:
        failed = exc  # quarantined, and built again below
    except StateError as exc:
        return exc
    try:
        counted = count_month(store, utcnow().strftime("%Y-%m"))
        with store.pipeline_lock():
            if _load(store) is None:
                store.save_token_tally(counted)
    except StateError as exc:
        return exc
    except LockBusy:
        pass
    return failed


def admit(batch: Batch, reserved: InboxRecord, call_lock: CallLock) -> InboxRecord | None:
    """Under the pipeline lock, with the comment's call lock, before ``reserved`` (its last attempt
    just reserved, not written) goes to disk: the month's check. Returns the record with the
    attempt's worst case on it, to be written; ``None`` when the batch stops here, nothing reserved
    (the budget is reached: exit 3; or the tally could not be read or written: exit 5), the call
    lock released and the item said."""
    if not applies(batch.settings):
        return reserved
    attempt, cid = reserved.attempts[-1], reserved.comment.id
    worst = worst_case(reserved.prompt)
    try:
        admit_tokens(
            batch.store,
            batch.settings.monthly_tokens,
            key_of(cid, attempt.n),
            worst,
            attempt.reserved_at[:7],
        )
    except BudgetReached as exc:
        call_lock.release()
        batch.stop("token_budget", exc, comment=cid)
        batch.add(ItemResult(cid, "not_started", message=str(exc)))
        return None
    except StateError as exc:
        call_lock.release()
        state_stop(batch, cid, "reserve_failed", exc)
        return None
    last = attempt.model_copy(update={"worst_tokens": worst})
    return reserved.model_copy(update={"attempts": [*reserved.attempts[:-1], last]})


def admit_tokens(store: Store, budget: int | None, key: str, worst: int, month: str) -> None:
    """Under the pipeline lock and the call's call lock, before its reservation is written: raise
    :class:`BudgetReached` if ``worst`` does not fit in what is left of ``month`` (the UTC month,
    YYYY-MM, of the reservation's time), else enter it as open, durably. ``budget`` ``None``: no
    limit: the tally is removed instead, if there is one (see the module's docstring). Raises
    :class:`StateError` when the tally cannot be read, written or removed (nothing reserved then
    either)."""
    if budget is None:
        store.forget_token_tally()
        return
    tally = _current(store, month)
    if tally is None:
        return
    if tally.used + worst > budget:
        raise BudgetReached(tally.used, budget, month, next_month(month))
    store.save_token_tally(tally.opened(key, worst))


def take_back(batch: Batch, reserved: InboxRecord) -> None:
    """Under the lock: the reservation admitted for ``reserved`` was not written, so its entry
    leaves the tally. A failure here leaves it for the next check, which finds no such attempt."""
    if applies(batch.settings):
        attempt = reserved.attempts[-1]
        settle(batch.store, key_of(reserved.comment.id, attempt.n), 0)


def settle(store: Store, key: str, tokens: int) -> None:
    """Under the lock, once the outcome of ``key``'s call is durable: it counts ``tokens`` (the
    usage reported; its worst case when none was). A failure leaves the worst case counted."""
    with contextlib.suppress(StateError):
        tally = store.load_token_tally()
        if tally is not None and key in tally.open:
            store.save_token_tally(tally.settle(key, tokens))


def month_used(store: Store, month: str) -> int | None:
    """The tokens ``month`` has used as the next check would count them, read without the lock
    and writing nothing (``status``, ``check``); ``None`` before any tally was kept."""
    try:
        tally = store.load_token_tally()
        if tally is None:
            return None
        if tally.month < month:
            return 0
        return _settled(store, tally).used
    except StateError:
        return None


def count_month(store: Store, month: str) -> TokenTally:
    """The tally of ``month`` from its attempts and reply drafts in the inbox files: only those of
    comments whose index entry changed this month are read (a reservation writes the record, and
    the entry follows it), as ``watcher usage`` reads them."""
    index, _ = store.reconcile_index(store.load_index())
    tally = TokenTally(month=month)
    for cid, entry in index.comments.items():
        if entry.updated_at[:7] < month:
            continue
        try:
            record = store.load_record(cid)
        except StateError:
            continue  # quarantined: its attempts are in no count any more
        if record is not None:
            tally = _count_record(store, tally, record)
    return tally


def _count_record(store: Store, tally: TokenTally, record: InboxRecord) -> TokenTally:
    cid, month = record.comment.id, tally.month
    calls = [
        (key_of(cid, a.n), a.worst_tokens or worst_case(record.prompt))
        for a in record.attempts
        if a.reserved_at.startswith(month) and spends(a.provider)
    ] + [
        # A draft admitted before its worst case was recorded: its prompt is not kept, the
        # comment's verdict prompt (the same comment and parent) stands for it.
        (key_of(cid, d.n, DRAFT), d.worst_tokens or worst_case(record.prompt, DRAFT_MAX_TOKENS))
        for d in record.drafts
        if d.reserved_at.startswith(month) and spends(d.provider)
    ]
    for key, worst in calls:
        tally = tally.opened(key, worst)
        over = _over(store, key, worst, record)
        tally = tally.settle(key, over) if over is not None else tally
    return tally


def _load(store: Store) -> TokenTally | None:
    try:
        return store.load_token_tally()
    except CorruptState:
        return None  # moved to quarantine: built again from the attempts


def _current(store: Store, month: str) -> TokenTally | None:
    """Under the lock: the tally of ``month`` with every call that is over settled; ``None`` for a
    reservation made in a month another run has already left behind (it is no longer counted)."""
    tally = _load(store)
    if tally is None:
        return count_month(store, month)  # :func:`prepare` made it, unless it went since
    if tally.month > month:
        return None
    if tally.month < month:
        return TokenTally(month=month)
    return _settled(store, tally)


def _settled(store: Store, tally: TokenTally) -> TokenTally:
    for key, worst in list(tally.open.items()):
        tokens = _over(store, key, worst)
        if tokens is not None:
            tally = tally.settle(key, tokens)
    return tally


def _over(store: Store, key: str, worst: int, record: InboxRecord | None = None) -> int | None:
    """What an open entry counts now that its call is over; ``None`` while it is in flight."""
    kind, cid, n = parse_key(key)
    if kind not in ("", DRAFT) or n < 1:
        # Another kind of call, settled by its own code (:func:`settle`): until then it counts its
        # worst case, and keeps it once its process is gone.
        return None if cid and store.call_in_flight(cid) else worst
    if record is None:
        try:
            record = store.load_record(cid)
        except StateError:
            return worst
    if record is None:
        return worst
    if kind == DRAFT:
        return _draft_over(store, record, n, worst)
    if len(record.attempts) < n:
        return 0  # entered, then never reserved: its run died in between, or the write failed
    attempt = record.attempts[n - 1]
    if not spends(attempt.provider):
        return 0  # entered by a run that died before its reservation; an agent's claim took n
    if attempt.outcome is None and not attempt.not_sent:
        return None if store.call_in_flight(cid) else worst
    return used_by(attempt, worst)


def _draft_over(store: Store, record: InboxRecord, n: int, worst: int) -> int | None:
    """:func:`_over` for reply draft ``n`` of ``record`` (SPEC §16.5), as for an attempt."""
    if len(record.drafts) < n:
        return 0  # entered, then never reserved: its run died in between, or the write failed
    made = record.drafts[n - 1]
    if made.outcome is None:
        return None if store.call_in_flight(record.comment.id) else worst
    return draft_used(made, worst)
