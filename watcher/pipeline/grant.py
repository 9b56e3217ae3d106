"""SPEC §13.2: ``watcher grant ID [--attempts N]`` — more attempts, by the person's decision.

The budget is the product's promise to the person who pays, so only that person raises it: the
bridge and the MCP server refuse (an agent never raises its own budget). The grant is appended
to the inbox file under the pipeline lock, so it cannot race a batch's reservation.
"""

from __future__ import annotations

from collections.abc import Callable

from watcher.commands.results import GrantResult
from watcher.errors import UsageError
from watcher.models import InboxRecord
from watcher.state import records
from watcher.store import Store

MAX_GRANT = 3  # per grant; records.MAX_GRANTED in all


def grant(
    store: Store,
    comment_id: str,
    attempts: int,
    *,
    entrypoint: str,
    run_id: str,
    confirm: Callable[[str], bool] | None = None,
) -> GrantResult:
    """Append ``{"at", "n"}`` to the comment's ``grants`` durably; the cap becomes 3 + grants.

    ``confirm`` (the front end's, SPEC §15.5) is asked the question once the grant is known to
    be possible, before the lock is taken (a person may take a minute to answer, and a batch
    must not wait behind that); ``None``: the person confirmed already (``--yes``). Raises
    :class:`UsageError` for a grant that cannot be made, or was not confirmed."""
    if not 1 <= attempts <= MAX_GRANT:
        raise UsageError(f"--attempts must be between 1 and {MAX_GRANT}, got {attempts}")
    record = _grantable(store, comment_id, attempts)
    if confirm is not None and not confirm(_question(record, attempts)):
        raise UsageError(
            f"nothing granted: {comment_id} keeps its {records.cap_of(record)} attempts"
        )
    with store.pipeline_lock():
        record = _grantable(
            store, comment_id, attempts
        )  # read again: decided before the lock (SPEC §1.3)
        granted = records.grant(record, attempts)
        store.save_record(granted)
        base = store.load_index()
        index, _ = store.reconcile_index(base, [comment_id])
        store.save_index(base, index)
    store.append_signals(
        [{"key": "item.granted", "comment": comment_id, "run": run_id, "entrypoint": entrypoint}]
    )
    return GrantResult(
        id=comment_id,
        granted=attempts,
        attempts=len(granted.attempts),
        cap=records.cap_of(granted),
        state=records.state_of(granted),
    )


def _grantable(store: Store, comment_id: str, attempts: int) -> InboxRecord:
    record = store.load_record(comment_id)
    if record is None:
        raise UsageError(
            f"no comment {comment_id} in {store.paths.inbox} — `watcher inbox --all` lists the "
            "known ones"
        )
    refusal = records.grant_refusal(record, attempts)
    if refusal is not None:
        raise UsageError(refusal)
    return record


def _question(record: InboxRecord, attempts: int) -> str:
    cap = records.cap_of(record)
    return (
        f"Give {record.comment.id} {attempts} more attempt{'s' if attempts > 1 else ''}? It has "
        f"used {records.spent(record)} of {cap}; each more may be a paid model call "
        f"(cap {cap} -> {cap + attempts})"
    )
