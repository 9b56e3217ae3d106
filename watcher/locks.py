"""The three cooperative locks of a data directory (SPEC §4, §7).

Lock files are separate ``.lock`` files, never the data they guard, and never deleted:
unlinking a lock file while another process waits on it splits the waiters across two inodes
and both then "hold" the lock (the bug that filelock 3.20.4–3.29.4 shipped).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from watcher.config import Paths
from watcher.errors import LockBusy, SaveFailed, StateError, UnsafePath

PIPELINE_WAIT_S = 5.0
# seen.json and the signal counter hold their locks for one read-merge-write: milliseconds.
# Waiting this long means something is wrong, and we say so instead of hanging.
SHORT_WAIT_S = 15.0


@contextmanager
def hold(path: Path, *, timeout: float, what: str = "another watcher run") -> Iterator[None]:
    """Hold the exclusive lock at ``path``; raise :class:`LockBusy` after ``timeout`` seconds.

    Raises :class:`SaveFailed` ("cannot write <path>: <reason>", exit 5) when the lock file
    cannot be created or opened — a read-only data dir used to surface as "internal error:
    PermissionError … pipeline.lock", exit 1 — and :class:`UnsafePath` when the name is a
    symlink or a directory. filelock opens lock files with ``O_NOFOLLOW``, so a link (one
    pointing outside the data dir, or a loop) is never created or written through.
    """
    # Imported here: filelock costs a noticeable part of start-up (bench/ figure 5), and
    # read-only commands (status, inbox, show on a current index) never take a lock.
    from filelock import FileLock, Timeout

    lock = FileLock(str(path), timeout=timeout)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except Timeout:
        # filelock raises only once ``timeout`` has passed; report that bound, not the measured
        # time, so the message is the documented "(waited 5.0 s)" and not 5.1 s on a busy box.
        raise LockBusy(path, timeout, what=what) from None
    except OSError as exc:  # after Timeout, which is an OSError (TimeoutError) too
        raise _cannot_lock(path, exc) from exc
    try:
        yield
    finally:
        lock.release()


def _cannot_lock(path: Path, exc: OSError) -> StateError:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return UnsafePath(path, f"a symbolic link (to {target!r}) where a lock file belongs",
                          fix="remove the link (watcher creates a fresh lock file)")
    if stat.S_ISDIR(mode):
        return UnsafePath(path, "a directory where a lock file belongs")
    # Name the file that could not be written: the locks/ directory when mkdir failed.
    return SaveFailed(Path(exc.filename) if isinstance(exc.filename, str) else path, exc)


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
