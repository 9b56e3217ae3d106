"""scan and recheck: the one implementation of SPEC §7, top to bottom.

    scan(run, source=, notice=) -> Partial      step 1 (fetch, plan) .. step 5 (save, counter)
    recheck(run, ids=, notice=) -> Partial
Where each step lives:

    plan.py      step 1    fetch from the source registry and plan, without the lock
    gate.py      §13.1     may the run call? cooldown, breaker, half-open; when a batch stops
    locked.py    steps 2–5 under the lock: create, apply dev.to's changes, save seen
    process.py   step 4    per item: re-read, decide, reserve; call; outcome (slow start, §16.6)
    outcomes.py  step 4    what a comment gets instead of a call
    due.py       §16.3     when a batch may call a comment again (the 10-minute rule)
    calls.py     §15.1     the model calls in flight, outside the lock (--parallel)
    provider_state.py      the cooldown after a 429 (§7.2) and the breaker (§13.1)
    batch.py               the Batch a run carries down every step: settings, store, summary,
                           signals
    agent.py     §14       provider agent: claim (reserve with a lease, hand out prompts) and submit

The decision for each comment is :func:`watcher.state.records.decide` (pure); every read and write
of state is the run's store (:mod:`watcher.store`).

The counter (SPEC §8) runs after the lock is released; ``--dry-run`` plans and stops there.
Nothing here climbs back up into :mod:`watcher.commands.core`: commands turns arguments into a
:class:`Run` and a :class:`Partial` into an envelope.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Generic, NamedTuple

from watcher.commands.results import BatchResult, ItemOutcome, ItemResult, ResultT, RunKind
from watcher.errors import CooldownActive, UsageError, WatcherError
from watcher.models import InboxRecord, SeenFile
from watcher.pipeline.batch import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    Batch,
    Hooks,
    Run,
    caught_signals,
    count_signals,
    new_run_id,
    open_store,
)
from watcher.pipeline.due import due_later, next_due
from watcher.pipeline.plan import Plan, Planned, check_id, plan_recheck, plan_scan
from watcher.pipeline.provider_state import read_cooldown, write_cooldown
from watcher.state.records import Decision, decide

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "Batch",
    "BatchResult",
    "Decision",
    "Hooks",
    "ItemOutcome",
    "ItemResult",
    "Partial",
    "Planned",
    "Run",
    "RunKind",
    "check_id",
    "check_limit",
    "decide",
    "new_run_id",
    "next_due",
    "open_store",
    "read_cooldown",
    "recheck",
    "scan",
    "write_cooldown",
]


class Partial(NamedTuple, Generic[ResultT]):
    """A result that stands even though the run must exit non-zero: a batch stopped by a 429
    still has a summary of what it did. ``error`` is ``None`` when the run ended well."""

    result: ResultT
    error: WatcherError | None


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(
            f"--limit must be between 1 and {MAX_LIMIT} model calls per run, got {limit}"
        )
    return limit


def scan(
    run: Run,
    *,
    source: str | None = None,
    notice: Callable[[str], None] = lambda _m: None,
    since: datetime | None = None,
    full: bool = False,
) -> Partial[BatchResult]:
    """Fetch, then make the first attempt for new and pending comments (SPEC §7, §13.3)."""
    batch = Batch(run, notice=notice)
    base, index = _read_index(batch)
    plan = plan_scan(batch, index, source, since=since, full=full)  # network here, before the lock
    if plan.interrupted is not None:
        # dev.to stopped answering midway: what was fetched goes through; the rest keeps its old
        # change signal, so the next scan fetches it. The run still ends loudly (exit 3).
        # The error says so itself (the fetched articles are processed, the rest come next scan):
        # no warning repeating it before the same line as the run's error.
        batch.fail(plan.interrupted)
    return _carry_out(batch, plan, base, index)


def recheck(
    run: Run,
    *,
    ids: Sequence[str] = (),
    notice: Callable[[str], None] = lambda _m: None,
) -> Partial[BatchResult]:
    """Retry failed comments and close orphaned reservations, or exactly ``ids`` (SPEC §7)."""
    batch = Batch(run, notice=notice)
    batch.named = frozenset(ids)
    base, index = _read_index(batch)
    return _carry_out(batch, plan_recheck(batch, index, ids), base, index)


def _read_index(batch: Batch) -> tuple[SeenFile, SeenFile]:
    """The index as stored (the merge's base) and reconciled for planning; nothing is saved here:
    the locked part saves it with the run's changes (SPEC §4.2)."""
    base = batch.store.load_index()
    index, _ = batch.store.reconcile_index(base)
    return base, index


def _carry_out(batch: Batch, plan: Plan, base: SeenFile, index: SeenFile) -> Partial[BatchResult]:
    from watcher.pipeline.locked import carry_out

    batch.result.planned = len(plan.items)
    if batch.run.dry_run:
        _dry_run(batch, plan, index)
        return Partial(batch.result, None)
    if batch.run.hooks.on_planned is not None:
        # The calls planned: none for provider agent, whose comments wait for the agent's claim.
        batch.run.hooks.on_planned(
            min(len(plan.items), batch.run.limit) if batch.calls_model else 0
        )
    from watcher.pipeline import gate

    try:
        with caught_signals(batch):
            # Provider agent: nothing is called, so no cooldown or breaker can stop the run.
            carry_out(batch, plan, base, gate.admit(batch, index) if batch.calls_model else gate.GO)
    finally:
        batch.close()
    count_signals(batch)
    return Partial(batch.result, batch.error)


def _dry_run(batch: Batch, whole: Plan, index: SeenFile) -> None:
    """Say what a real run would do now, touching nothing: no lock, no writes, no calls. What
    dev.to changed (edits, deletions) is applied to the records in memory, as the real run would
    before deciding (SPEC §15.2); so is the baseline mark `scan --since` clears (``requeued``)."""
    from watcher.state import records as rec

    plan, requeued = whole.items, whole.requeued
    from watcher.pipeline.provider_state import pending_cooldown

    result = batch.result
    cooldown = read_cooldown(batch.store, now=batch.now())
    if cooldown is None and batch.calls_model:
        # A 429 whose cooldown is not on disk yet: the real run would write it and call nothing.
        state = batch.store.load_provider_state()
        pending = pending_cooldown(batch.store, index, state, now=batch.now())
        if pending is not None and pending.cooldown_until is not None:
            cooldown = CooldownActive(pending.cooldown_until, pending.reason or "rate limited")
    for position, item in enumerate(plan):
        if len(result.would_call) >= batch.run.limit:
            result.remaining = len(plan) - position
            break
        record = None if item.comment is not None else batch.store.load_record(item.id)
        if record is not None and (edit := whole.edits.get(item.id)) is not None:
            record = rec.apply_edit(record, edit.text, edit.prompt, judged=True)
        if record is not None and item.id in whole.gone:
            record = rec.mark_gone(record, *whole.gone[item.id])
        if record is None:
            action: Decision = "call"
        else:
            if item.id in requeued and not record.attempts:
                record = record.model_copy(update={"baseline": False})
            action = _dry_decide(batch, item, record)
        if action == "call" and not batch.calls_model:
            result.for_agent += 1
        elif action == "call":
            result.would_call.append(item.id)
            batch.add(
                ItemResult(item.id, "not_started", message=str(cooldown))
                if cooldown
                else ItemResult(item.id, "would_call")
            )
        else:
            batch.add(ItemResult(item.id, "would_skip", kind=action))


def _dry_decide(batch: Batch, item: Planned, record: InboxRecord) -> Decision:
    """What the real run would decide for ``record`` now, the 10-minute rule (SPEC §16.3) too."""
    from watcher.pipeline.process import live_call

    action = decide(
        batch.run.command,
        record,
        item.fingerprint,
        now=batch.now(),
        call_in_flight=live_call(batch, record),
    )
    if action == "call" and item.id not in batch.named and due_later(record, batch.now()):
        return "deferred"
    return action
