"""SPEC §13.2: ``watcher grant ID [--attempts N]`` — more attempts, by the person's decision.

The budget is the product's promise to the person who pays, so only that person raises it: the
bridge and the MCP server refuse (an agent never raises its own budget). The grant is appended
to the inbox file under the pipeline lock, so it cannot race a batch's reservation.
"""

from __future__ import annotations

from watcher import inbox, seen, signals
from watcher.config import Settings
from watcher.errors import UsageError
from watcher.locks import pipeline_lock
from watcher.results import GrantResult

MAX_GRANT = 3


def grant(settings: Settings, comment_id: str, attempts: int, *, entrypoint: str) -> GrantResult:
    """Append ``{"at", "n"}`` to the comment's ``grants`` durably; the cap becomes 3 + grants."""
    if not 1 <= attempts <= MAX_GRANT:
        raise UsageError(f"--attempts must be between 1 and {MAX_GRANT}, got {attempts}")
    paths = settings.paths
    with pipeline_lock(paths):
        record = inbox.load(paths, comment_id)
        if record is None:
            raise UsageError(f"no comment {comment_id} in {paths.inbox} — `watcher inbox --all` lists the known ones")
        state = inbox.state_of(record)
        if state == "done":
            raise UsageError(f"{comment_id} already has a verdict: nothing to try again")
        if state == "pending":
            raise UsageError(f"{comment_id} has not been tried yet: `watcher scan` makes its first attempt")
        granted = inbox.grant(record, attempts)
        inbox.save(paths, granted)
        base = seen.load(paths)
        index, _ = seen.reconcile(paths, base, [comment_id])
        seen.save(paths, base, index)
    signals.emit(paths, "item.granted", run=signals.new_run_id(), entrypoint=entrypoint, comment=comment_id)
    return GrantResult(id=comment_id, granted=attempts, attempts=len(granted.attempts), cap=inbox.cap_of(granted),
                       state=inbox.state_of(granted))
