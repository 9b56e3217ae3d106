"""SPEC §13.2: ``watcher grant ID [--attempts N]`` — more attempts, by the person's decision.

The budget is the product's promise to the person who pays, so only that person raises it: the
bridge and the MCP server refuse (an agent never raises its own budget). The grant is appended
to the inbox file under the pipeline lock, so it cannot race a batch's reservation.
"""

from __future__ import annotations

from watcher import records
from watcher.errors import UsageError
from watcher.results import GrantResult
from watcher.store import Store

MAX_GRANT = 3


def grant(store: Store, comment_id: str, attempts: int, *, entrypoint: str, run_id: str) -> GrantResult:
    """Append ``{"at", "n"}`` to the comment's ``grants`` durably; the cap becomes 3 + grants."""
    if not 1 <= attempts <= MAX_GRANT:
        raise UsageError(f"--attempts must be between 1 and {MAX_GRANT}, got {attempts}")
    with store.pipeline_lock():
        record = store.load_record(comment_id)
        if record is None:
            raise UsageError(f"no comment {comment_id} in {store.paths.inbox} — `watcher inbox --all` lists the "
                             "known ones")
        state = records.state_of(record)
        if state == "done":
            raise UsageError(f"{comment_id} already has a verdict: nothing to try again")
        if state == "pending":
            raise UsageError(f"{comment_id} has not been tried yet: `watcher scan` makes its first attempt")
        granted = records.grant(record, attempts)
        store.save_record(granted)
        base = store.load_index()
        index, _ = store.reconcile_index(base, [comment_id])
        store.save_index(base, index)
    store.append_signals([{"key": "item.granted", "comment": comment_id, "run": run_id, "entrypoint": entrypoint}])
    return GrantResult(id=comment_id, granted=attempts, attempts=len(granted.attempts), cap=records.cap_of(granted),
                       state=records.state_of(granted))
