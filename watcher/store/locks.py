"""The three cooperative locks of a data directory (SPEC §4, §7).

Lock files are separate ``.lock`` files, never the data they guard, and never deleted:
unlinking a lock file while another process waits on it splits the waiters across two inodes
and both then "hold" the lock (the bug that filelock 3.20.4–3.29.4 shipped).

The lock itself is filelock's native primitive (:func:`filelock.lock_descriptor`, ``flock`` on
Unix, the one :class:`filelock.FileLock` takes) on a descriptor this module opens. A
``FileLock`` object costs about 800 Python calls per acquire and release (thread-local holds,
fork registry, singleton checks: ~0.5 ms here) for features no watcher lock uses, and the
signals lock is taken once per model call (bench/run.py figure 1); opening the file and taking the
same ``flock`` ourselves is ~20 µs, and still contends with any ``FileLock`` on the file.
What ``FileLock`` did that matters here is kept: ``O_NOFOLLOW``, a wait that gives up after
the timeout, and a lock file deleted while we waited is opened afresh, not held as an orphan.
``lock_descriptor`` is filelock 3.30's, hence the project's ``filelock>=3.30``.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from watcher.config import Paths
from watcher.errors import LockBusy, SaveFailed, StateError, UnsafePath
from watcher.store.dirs import real_directories
from watcher.store.durable import make_dirs

PIPELINE_WAIT_S = 5.0
# seen.json and the signal counter hold their locks for one read-merge-write: milliseconds.
# Waiting this long means something is wrong, and we say so instead of hanging.
SHORT_WAIT_S = 15.0

# O_NOFOLLOW: a symlink at the lock's name (one pointing outside the data dir, or a loop) is
# never created or written through. O_NONBLOCK: a FIFO planted there cannot hang the open.
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# filelock's own default: 0o666 through the umask (and default ACLs), so a group-shared data
# dir keeps working as it did when FileLock created these files.
_MODE = 0o666
# Waiting polls: short at first (every lock is held for milliseconds, so a waiter should not
# sleep 50 ms behind one), and never longer than 10 ms: with the pipeline lock taken once per
# decision and answer (SPEC §15.1), a waiter sleeping 50 ms kept losing it to holders that came
# later (bench/run.py figure 8). A poll is one syscall.
_FIRST_PAUSE_S = 0.001
_MAX_PAUSE_S = 0.01


@contextmanager
def hold(
    path: Path,
    *,
    timeout: float,
    what: str = "another watcher run",
    within: Path | None = None,
) -> Iterator[None]:
    """Hold the exclusive lock at ``path``; raise :class:`LockBusy` after ``timeout`` seconds.

    Raises :class:`SaveFailed` ("cannot write <path>: <reason>", exit 5) when the lock file
    cannot be created or opened — a read-only data dir, never "internal error: PermissionError …",
    exit 1 (tests/test_special_paths.py) — and :class:`UnsafePath` when the name is a
    symlink or a directory — or when ``locks/`` (or a directory between ``within``, the data dir's
    chosen part, and it) is a link, which would put the locks outside the data dir, out of reach
    of a run that sees the real one; :class:`StateError` when the filesystem has no ``flock``
    (locks are local, SPEC §11).
    """
    if within is not None:
        real_directories(path.parent, below=within)
    # Imported on first use: filelock costs a noticeable part of start-up (bench/run.py figure 5), and
    # read-only commands (status, inbox, show on a current index) never take a lock.
    from filelock import lock_descriptor, unlock_descriptor

    fd = _acquire(path, timeout, what, lock_descriptor)
    try:
        yield
    finally:
        try:
            unlock_descriptor(fd)
        finally:
            os.close(fd)  # closing would release the flock anyway; unlock first says so


def _acquire(
    path: Path, timeout: float, what: str, lock: Callable[..., bool], kept: int | None = None
) -> int:
    """An open descriptor of ``path`` holding its lock, within ``timeout`` seconds.

    ``kept``: a descriptor of ``path`` opened before (:class:`KeptLock`), tried first; it is
    closed if its file was unlinked meanwhile, as any descriptor here."""
    deadline = time.monotonic() + timeout
    pause = _FIRST_PAUSE_S
    while True:
        fd, kept = (_open(path) if kept is None else kept), None
        try:
            while not lock(fd, blocking=False):
                left = deadline - time.monotonic()
                if left <= 0:
                    # Report the bound, not the measured time: the message is the documented
                    # "(waited 5.0 s)", not 5.1 s on a busy box.
                    raise LockBusy(path, timeout, what=what)
                time.sleep(min(pause, left))
                pause = min(pause * 2, _MAX_PAUSE_S)
            # Someone unlinked the file (or renamed another over it) while we waited: our flock
            # is on an inode nobody else will open, so it excludes no one. Take the new one.
            if os.fstat(fd).st_nlink > 0:
                return fd
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP):
                raise StateError(
                    f"cannot lock {path}: the filesystem does not support flock "
                    f"({exc.strerror}); keep the data dir on a local disk"
                ) from exc
            raise _cannot_lock(path, exc) from exc
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


# Every kept descriptor of this process. A forked child closes its copies at once: a copy shares
# the parent's open file description, and with it the flock — a child locking it would not
# exclude the parent, and a child outliving a SIGKILLed parent would keep the parent's lock held.
_KEPT: weakref.WeakSet[KeptLock] = weakref.WeakSet()


def _close_kept_in_child() -> None:
    for kept in list(_KEPT):
        kept.close()


os.register_at_fork(after_in_child=_close_kept_in_child)


class KeptLock:
    """One lock file held again and again by one store (one command), its descriptor kept open
    between holds.

    A run takes the pipeline lock twice per model call and the signals lock once (SPEC §15.1);
    opening and closing the file and checking ``locks/`` each time was a share of a call's
    bookkeeping (bench/run.py figure 1). Between holds the descriptor holds no lock, so it
    excludes nobody. What a fresh open gives is kept: a file unlinked since is opened afresh
    (:func:`_acquire`), and ``locks/`` is checked for a link at the first open — a link planted
    later cannot carry this lock elsewhere, and every run that opens the lock afresh meets it.

    A hold while the kept descriptor is in use — a nested hold, another thread — opens its own
    descriptor, as :func:`hold` does, and a forked child closes the descriptors it inherited
    (:data:`_KEPT`): ``flock`` excludes open file descriptions, never two holds of one."""

    def __init__(self, path: Path, *, within: Path | None) -> None:
        self._path = path
        self._within = within
        self._fd: int | None = None
        self._free = threading.Lock()
        _KEPT.add(self)

    @contextmanager
    def hold(self, *, timeout: float, what: str = "another watcher run") -> Iterator[None]:
        if not self._free.acquire(blocking=False):
            with hold(self._path, timeout=timeout, what=what, within=self._within):
                yield
            return
        try:
            from filelock import lock_descriptor, unlock_descriptor

            kept, self._fd = self._fd, None
            if kept is None and self._within is not None:
                real_directories(self._path.parent, below=self._within)
            fd = _acquire(self._path, timeout, what, lock_descriptor, kept)
            try:
                yield
            finally:
                try:
                    unlock_descriptor(fd)
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd
        finally:
            self._free.release()

    def close(self) -> None:
        """Close the kept descriptor (it holds no lock between holds)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001,S110 - interpreter shutdown: the OS closes it anyway
            pass


def _open(path: Path) -> int:
    try:
        return os.open(path, _OPEN_FLAGS, _MODE)
    except OSError as exc:
        if os.path.isdir(path.parent):
            raise _cannot_lock(path, exc) from exc
    # No locks/ yet (a new data dir): made here rather than checked before every hold. A
    # failure names the directory that could not be made.
    try:
        # Synced: the first lock of a new data dir creates the data dir itself, and every state
        # file written into it later is only as durable as its entry.
        make_dirs(path.parent)
        return os.open(path, _OPEN_FLAGS, _MODE)
    except OSError as exc:
        raise _cannot_lock(path, exc) from exc


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
        return UnsafePath(
            path,
            f"a symbolic link (to {target!r}) where a lock file belongs",
            fix="remove the link (watcher creates a fresh lock file)",
        )
    if stat.S_ISDIR(mode):
        return UnsafePath(path, "a directory where a lock file belongs")
    # Name the file that could not be written: the locks/ directory when mkdir failed.
    return SaveFailed(Path(exc.filename) if isinstance(exc.filename, str) else path, exc)


class CallLock:
    """A comment's call lock, held by this process (SPEC §15.1): ``flock`` on
    ``locks/calls/<id>.lock``, which the kernel releases when the process dies, so a reservation
    whose lock is free has no call in flight anywhere."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        """Let go (after the outcome is durable); a second release does nothing."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        from filelock import unlock_descriptor

        try:
            unlock_descriptor(fd)
        finally:
            os.close(fd)


def try_call_lock(path: Path, *, within: Path | None = None) -> CallLock | None:
    """The lock at ``path`` if nobody holds it now (no wait), else ``None``.

    ``flock`` locks belong to an open file description, so a second run in the same process (the
    MCP server's worker threads) is kept out as surely as another process."""
    from filelock import lock_descriptor

    if within is not None:
        real_directories(path.parent, below=within)
    try:
        fd = _acquire(path, 0.0, "a call in flight", lock_descriptor)
    except LockBusy:
        return None
    return CallLock(fd)


def make_call_locks(paths: Sequence[Path], *, within: Path | None = None) -> None:
    """Create the lock files of calls about to be made, all in a row, before any is taken.

    Only a speed-up, so it never fails: whatever goes wrong here (a link planted at ``locks/calls``,
    a read-only disk) is met again, and reported, where each lock is taken (:func:`try_call_lock`).
    A scan's first call of a comment makes its lock file. Made there, between the comment's
    durable writes, it cost 1.5–1.7 ms on this machine's ext4 and made the reservation written
    next ~1 ms slower; made in a row after the run's first writes, 0.25–0.7 ms each; made in a
    row before them, 0.03–0.09 ms each (bench/run.py figure 1c; bench/README.md)."""
    if not paths:
        return
    directory = paths[0].parent
    try:
        if within is not None:
            real_directories(directory, below=within)
        if not os.path.isdir(directory):
            make_dirs(directory)
        for path in paths:
            os.close(os.open(path, _OPEN_FLAGS, _MODE))
    except (OSError, StateError):
        return


def held_elsewhere(path: Path, *, within: Path | None = None) -> bool:
    """Whether another open file description holds the lock at ``path`` now (another process, or
    another run of this one). Creates nothing: no lock file means no call was ever in flight
    there, and a dry run (which writes nothing) may ask too."""
    from filelock import lock_descriptor, unlock_descriptor

    if within is not None:
        real_directories(path.parent, below=within)
    try:
        fd = os.open(path, _OPEN_FLAGS & ~os.O_CREAT)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _cannot_lock(path, exc) from exc
    try:
        if lock_descriptor(fd, blocking=False):
            unlock_descriptor(fd)
            return False
        return True
    finally:
        os.close(fd)


def seen_lock(paths: Paths) -> AbstractContextManager[None]:
    """Held only for one read-merge-write of seen.json, never across a model call."""
    return hold(paths.seen_lock, timeout=SHORT_WAIT_S, within=paths.user_part)


def signals_lock(paths: Paths) -> AbstractContextManager[None]:
    """Held for one append to observations.jsonl or one counter state update."""
    return hold(paths.signals_lock, timeout=SHORT_WAIT_S, within=paths.user_part)
