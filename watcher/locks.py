"""The three cooperative locks of a data directory (SPEC §4, §7).

Lock files are separate ``.lock`` files, never the data they guard, and never deleted:
unlinking a lock file while another process waits on it splits the waiters across two inodes
and both then "hold" the lock (the bug that filelock 3.20.4–3.29.4 shipped).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from watcher.config import Paths
from watcher.errors import LockBusy

PIPELINE_WAIT_S = 5.0
# seen.json and the signal counter hold their locks for one read-merge-write: milliseconds.
# Waiting this long means something is wrong, and we say so instead of hanging.
SHORT_WAIT_S = 15.0


@contextmanager
def hold(path: Path, *, timeout: float, what: str = "another watcher run") -> Iterator[None]:
    """Hold the exclusive lock at ``path``; raise :class:`LockBusy` after ``timeout`` seconds."""
    # Imported here: filelock costs a noticeable part of start-up (bench/ figure 5), and
    # read-only commands (status, inbox, show on a current index) never take a lock.
    from filelock import FileLock, Timeout

    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        # filelock raises only once ``timeout`` has passed; report that bound, not the measured
        # time, so the message is the documented "(waited 5.0 s)" and not 5.1 s on a busy box.
        raise LockBusy(path, timeout, what=what) from None
    try:
        yield
    finally:
        lock.release()


def pipeline_lock(paths: Paths, *, timeout: float | None = None) -> AbstractContextManager[None]:
    """Held by scan/recheck from reconcile to the seen save, model calls included.

    ``timeout`` defaults to :data:`PIPELINE_WAIT_S` as it is *now*, not as it was at import: a
    default bound at import would make the tests either wait the real 5 s or patch every caller.
    """
    return hold(paths.pipeline_lock, timeout=PIPELINE_WAIT_S if timeout is None else timeout)


def seen_lock(paths: Paths) -> AbstractContextManager[None]:
    """Held only for one read-merge-write of seen.json, never across a model call."""
    return hold(paths.seen_lock, timeout=SHORT_WAIT_S)


def signals_lock(paths: Paths) -> AbstractContextManager[None]:
    """Held for one append to observations.jsonl or one counter state update."""
    return hold(paths.signals_lock, timeout=SHORT_WAIT_S)
