"""What a comment gets instead of a call, and a state write that stops the batch (SPEC §7 steps
4.1–4.5, §7.1): shared by the batch (:mod:`watcher.pipeline.process`) and the agent's claim and
submit (:mod:`watcher.pipeline.agent`)."""

from __future__ import annotations

from typing import Literal

from watcher.commands.results import ItemOutcome, ItemResult
from watcher.errors import CorruptState, LockBusy, SaveFailed, StateError
from watcher.models import InboxRecord
from watcher.pipeline.batch import Batch
from watcher.pipeline.in_flight import InFlight
from watcher.state import records
from watcher.state.records import Decision


def reread(batch: Batch, cid: str) -> InboxRecord | None:
    """The comment's inbox file as it is now (step 4.1); a corrupt or missing one is reported
    skipped."""
    store = batch.store
    try:
        record = store.load_record(cid)
    except StateError as exc:
        if isinstance(exc, CorruptState):
            batch.emit("state.quarantined", comment=cid)
        batch.fail(exc)
        batch.add(ItemResult(cid, "skipped", kind=exc.kind, message=str(exc)))
        return None
    if record is None:
        batch.add(
            ItemResult(
                cid,
                "skipped",
                message=f"its inbox file is gone (see {store.paths.quarantine}); "
                "restore it to go on — a new record would restart its 3-attempt budget",
            )
        )
    return record


def no_call(
    batch: Batch, record: InboxRecord, action: Decision, *, live: bool | InFlight = False
) -> None:
    """Record what a comment got instead of a call (steps 4.2–4.5): its outcome, signal and item.

    ``live``: a call for it is in flight elsewhere — the open reservation found so
    (:class:`InFlight`), or ``True``: its call lock was busy when this run went to take it."""
    cid, n = record.comment.id, len(record.attempts)
    if action == "skipped" and record.gone is not None:
        batch.add(
            ItemResult(
                cid,
                "skipped",
                message=f"{record.gone.kind} on dev.to ({record.gone.why}): never called again",
                attempts=n,
            )
        )
    elif action == "skipped" and records.edit_on_hold(record):
        batch.add(
            ItemResult(
                cid,
                "skipped",
                message="edited after you replied or marked it: recorded, not judged again",
                attempts=n,
            )
        )
    elif action == "skipped" and record.verdict is not None:
        outcome: ItemOutcome = "repaired" if cid in batch.result.repaired else "skipped"
        batch.add(ItemResult(cid, outcome, message="verdict already saved", attempts=n))
    elif action == "skipped" and record.replied_at is not None:
        batch.add(
            ItemResult(
                cid,
                "skipped",
                message=f"you replied on dev.to at {record.replied_at}: no call needed",
                attempts=n,
            )
        )
    elif action == "skipped" and record.baseline:
        batch.add(
            ItemResult(
                cid,
                "skipped",
                message="baseline (older than the first scan's backlog window): "
                "`watcher scan --since DATE` queues it",
                attempts=n,
            )
        )
    elif action == "skipped":  # recheck asked for a comment that has never been tried
        batch.add(
            ItemResult(
                cid,
                "skipped",
                message="never attempted: `watcher scan` makes the first attempt",
                attempts=n,
            )
        )
    elif action == "interrupted":
        try:
            batch.store.save_record(records.mark_interrupted(record))
        except SaveFailed as exc:
            state_stop(batch, cid, "save_failed", exc)
            return
        lease = record.attempts[-1].lease_until
        why = (
            f"was claimed by an agent (lease until {lease}) and never submitted"
            if lease
            else "was left reserved by a process that died"
        )
        batch.emit("attempt.interrupted", comment=cid)
        batch.add(
            ItemResult(
                cid,
                "interrupted",
                kind="interrupted",
                message=f"attempt {n} {why}; no call this run",
                attempts=n,
            )
        )
    elif action == "deferred" and (lease := records.open_lease(record)) is not None:
        batch.emit("item.deferred", comment=cid)
        batch.add(
            ItemResult(
                cid,
                "deferred",
                message=f"attempt {n} is claimed by an agent until {lease}: "
                "its verdict comes by submit; after that time the next run closes it",
                attempts=n,
            )
        )
    elif action == "deferred" and live:
        batch.emit("item.deferred", comment=cid)
        batch.add(ItemResult(cid, "deferred", message=_busy(batch, record, live), attempts=n))
    elif action == "deferred":
        batch.emit("item.deferred", comment=cid)
        batch.add(
            ItemResult(
                cid,
                "deferred",
                message="changed by another command while this one waited; "
                "run again to act on the new state",
                attempts=n,
            )
        )
    else:
        batch.emit("item.exhausted", comment=cid)
        batch.add(
            ItemResult(
                cid,
                "exhausted",
                message=f"all {records.cap_of(record)} attempts spent; "
                f"`watcher grant {cid}` gives it another try",
                attempts=n,
            )
        )


def _busy(batch: Batch, record: InboxRecord, live: bool | InFlight) -> str:
    """Why a comment is left to a call in flight elsewhere (SPEC §15.1)."""
    cid = record.comment.id
    if isinstance(live, InFlight) and live.until is not None:
        return (
            f"attempt {live.n} is reserved by pid {live.pid}, which still runs, but its call lock "
            f"({batch.store.paths.call_lock_file(cid)}) is not the one it was reserved under "
            "(removed or replaced): no call beside it; once that process ends, or from "
            f"{live.until} on, a run closes the attempt as interrupted"
        )
    if isinstance(live, InFlight):
        return (
            f"attempt {live.n} is in flight in pid {live.pid} (another run's call): "
            "its outcome comes from that run"
        )
    # The lock was busy when this run went to take it, with no reservation of another run seen
    # under the pipeline lock: something else holds the file (a dry run's look at it, a tool).
    return (
        f"its call lock ({batch.store.paths.call_lock_file(cid)}) is held by another process: "
        "not called this run; the next run tries it"
    )


def state_stop(
    batch: Batch,
    cid: str,
    outcome: Literal["reserve_failed", "save_failed"],
    exc: StateError | LockBusy,
) -> None:
    # A disk that cannot hold our state must not keep buying calls: stop the batch (exit 5).
    batch.stop(outcome, exc, comment=cid)
    batch.add(ItemResult(cid, outcome, kind="save_failed", message=str(exc)))
