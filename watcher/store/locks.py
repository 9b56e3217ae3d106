"""The cooperative locks of a data directory (SPEC §4, §7, §15.1) and the policy around them.

Every wait is :class:`filelock.FileLock`'s own, used as its authors intend: a timeout, a poll
interval, and ``cancel_check`` to end a wait early. What is watcher's is the policy: how long a
command may wait in all (:class:`Waits`, SPEC §16.3), that a signal ends a wait (SPEC §16.6), and
what the person reads when a lock stays busy (:class:`watcher.errors.LockBusy`, exit 4).

Lock files are separate ``.lock`` files, never the data they guard, and never deleted
(``preserve_lock_file``): unlinking a lock file while another process waits on it splits the
waiters across two inodes and both then "hold" the lock (filelock 3.20.4–3.29.4 did that, hence
the project's ``filelock>=3.30``). ``FileLock`` opens with ``O_NOFOLLOW`` and ``O_NONBLOCK`` (a
link or a FIFO planted at the name is never followed or waited on), takes the lock file afresh if
it was unlinked while waited for, and closes, in a forked child, the descriptors of the locks its
parent holds: a child shares the parent's open file description, and with it the ``flock``
(tests/test_locks.py).
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from watcher.config import Paths
from watcher.errors import (
    Interrupted,
    LockBusy,
    SaveFailed,
    StateError,
    UnsafePath,
    WatcherError,
)
from watcher.store.dirs import real_directories
from watcher.store.durable import make_dirs

if TYPE_CHECKING:
    from filelock import FileLock

# SPEC §15.1, §16.3: what one command may wait for the pipeline lock, in all.
PIPELINE_WAIT_S = 5.0
# seen.json and the signal counter hold their locks for one read-merge-write: milliseconds.
# Waiting this long means something is wrong, and we say so instead of hanging.
SHORT_WAIT_S = 15.0

# Every lock is held for milliseconds, and the pipeline lock is taken once per decision and
# answer (SPEC §15.1): a waiter polling every 50 ms (filelock's default) kept losing it to
# holders that came later. A poll is one syscall.
_POLL_S = 0.01
# For the call locks' files made ahead (make_call_locks) and the probe of held_elsewhere: the
# flags and mode FileLock opens with, so the files are the ones it then takes.
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_MODE = 0o666  # through the umask (and default ACLs): a group-shared data dir keeps working


class LockWaitInterrupted(Interrupted, LockBusy):
    """SIGINT or SIGTERM ended a lock wait (SPEC §16.6): exit 130 / 143 at once, not 4.

    An :class:`Interrupted` for the exit code and ``kind``, and a :class:`LockBusy` because the lock
    was not taken: every caller that handles a busy lock (the comment is not started, the index is
    left for the next run to repair) handles this one the same way."""

    def __init__(self, signum: int, path: Path, waited_s: float, *, what: str) -> None:
        name = signal.Signals(signum).name
        WatcherError.__init__(
            self,
            f"stopped by {name} while waiting for the {path.stem} lock ({what} holds {path}; "
            f"waited {waited_s:.1f} s): no further model call was started",
        )
        self.exit_code = Interrupted(signum).exit_code
        self.path = path
        self.waited_s = waited_s


def _never() -> int | None:
    return None


class Waits:
    """The lock waits of one command: one store, one command (SPEC §16.3, §16.6).

    ``budget``: the seconds this command may wait for the pipeline lock in all, however many
    holds it takes; the first wait starts drawing from it and every later one draws what is left.
    ``stopped``: a signal number once the person stopped the command; from then on a lock that
    is busy is not waited for at all. ``on_wait``: called with the lock's path when a lock is found
    held and the wait begins (tests wait for it instead of sleeping)."""

    def __init__(
        self,
        budget: float = PIPELINE_WAIT_S,
        *,
        on_wait: Callable[[Path], None] | None = None,
    ) -> None:
        self.budget = budget
        self.waited = 0.0
        self.on_wait = on_wait
        self.stopped: Callable[[], int | None] = _never

    @contextmanager
    def pipeline(self, path: Path, *, timeout: float | None, within: Path | None) -> Iterator[None]:
        """Hold the pipeline lock, waiting at most ``timeout`` (default: the budget) and never
        longer than what is left of the budget."""
        left = max(0.0, self.budget - self.waited)
        limit = left if timeout is None or timeout >= left else max(0.0, timeout)
        # What the message says was waited: the bound, not the measured time (the documented
        # "(waited 5.0 s)", not 5.1 s on a busy box) — the budget once it is what ends the wait.
        bound = self.budget if limit == left else self.waited + limit
        waited: list[float] = []
        try:
            lock = _take(path, limit, self, within=within, waited=waited, bound=bound)
        finally:
            self.waited += sum(waited)
        try:
            yield
        finally:
            lock.release()

    @contextmanager
    def short(
        self, path: Path, *, within: Path | None, what: str = "another watcher run"
    ) -> Iterator[None]:
        """Hold a lock kept for one read-merge-write (seen.json, the signals): its own wait."""
        lock = _take(path, SHORT_WAIT_S, self, within=within, what=what)
        try:
            yield
        finally:
            lock.release()


@contextmanager
def hold(
    path: Path,
    *,
    timeout: float,
    what: str = "another watcher run",
    within: Path | None = None,
    on_wait: Callable[[Path], None] | None = None,
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
    lock = _take(path, timeout, Waits(timeout, on_wait=on_wait), within=within, what=what)
    try:
        yield
    finally:
        lock.release()


def _take(
    path: Path,
    timeout: float,
    waits: Waits,
    *,
    within: Path | None,
    what: str = "another watcher run",
    waited: list[float] | None = None,
    bound: float | None = None,
) -> FileLock:
    """A held :class:`FileLock` of ``path`` within ``timeout`` seconds; the seconds spent waiting
    (nothing when the lock was free) are appended to ``waited``. ``bound``: the seconds a busy
    lock's message says were waited (``timeout`` if not given)."""
    # Imported on first use: read-only commands (status, inbox, show) never take a lock.
    from filelock import FileLock, Timeout

    if within is not None:
        real_directories(path.parent, below=within)
    _make_parent(path)
    lock = FileLock(
        path,
        poll_interval=_POLL_S,
        fallback_to_soft=False,  # no flock: a StateError, never a lock that excludes no one
        preserve_lock_file=True,
    )
    try:
        try:
            lock.acquire(blocking=False)
        except Timeout:
            if waits.on_wait is not None:
                waits.on_wait(path)
            began = time.monotonic()
            try:
                lock.acquire(timeout=timeout, cancel_check=lambda: waits.stopped() is not None)
            finally:
                if waited is not None:
                    waited.append(time.monotonic() - began)
    except Timeout:
        signum = waits.stopped()
        if signum is not None:
            spent = waits.waited + sum(waited or ())
            raise LockWaitInterrupted(signum, path, spent, what=what) from None
        raise LockBusy(path, timeout if bound is None else bound, what=what) from None
    except OSError as exc:
        if exc.errno in (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP):
            raise StateError(
                f"cannot lock {path}: the filesystem does not support flock "
                f"({exc.strerror}); keep the data dir on a local disk"
            ) from exc
        raise _cannot_lock(path, exc) from exc
    return lock


def _make_parent(path: Path) -> None:
    """No locks/ yet (a new data dir): made here, synced, rather than by FileLock. The first lock
    of a new data dir creates the data dir itself, and every state file written into it later is
    only as durable as its entry. A failure names the directory that could not be made."""
    if os.path.isdir(path.parent):
        return
    try:
        make_dirs(path.parent)
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
    whose lock is free has no call in flight anywhere — if the lock is the one the reservation was
    made under. A lock file removed or replaced during the call is another file: its lock says
    nothing of this call. So the reservation made under the lock is stamped into the file as held
    (:meth:`stamp`), with the file's own identity, and a run that finds the reservation open asks
    :func:`call_lock_state`, which trusts a free lock only when it carries that stamp."""

    def __init__(self, lock: FileLock, fd: int | None = None, held: os.stat_result | None = None):
        self._lock: FileLock | None = lock
        self._fd = fd
        self._held = held

    @property
    def identity(self) -> tuple[int, int] | None:
        """``(st_dev, st_ino)`` of the lock file as held (``None`` once released)."""
        if self._lock is None or self._held is None:
            return None
        return self._held.st_dev, self._held.st_ino

    def stamp(self, token: str) -> None:
        """Write ``token`` (what names the reservation made under this lock: :func:`stamp_of`)
        into the held file, before the reservation is written. Never fails: a file that cannot
        take it (read-only, a full disk) only leaves the lock unable to vouch for the reservation,
        and a run that finds it open then asks whether its process still runs instead
        (watcher/pipeline/in_flight.py)."""
        if self._lock is None or self._fd is None or self._held is None:
            return
        data = stamp_of(token, self._held).encode()
        try:
            os.pwrite(self._fd, data, 0)
            os.ftruncate(self._fd, len(data))
        except OSError:
            return

    def release(self) -> None:
        """Let go (after the outcome is durable); a second release does nothing."""
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()


def stamp_of(token: str, st: os.stat_result) -> str:
    """What a call-lock file holds while a reservation made under it is open: the reservation's
    ``token`` and the file's own ``st_dev:st_ino``, so that a copy of the file (a restored backup,
    a file planted with the same text) is not taken for it."""
    return f"{token} {st.st_dev}:{st.st_ino}\n"


def try_call_lock(path: Path, *, within: Path | None = None) -> CallLock | None:
    """The lock at ``path`` if nobody holds it now (no wait), else ``None``.

    A new ``FileLock`` each time, so a second run in the same process (the MCP server's worker
    threads) has its own open file description and is kept out as surely as another process. Not
    thread-local: the call's worker thread may release what the batch's thread took."""
    from filelock import FileLock, Timeout

    if within is not None:
        real_directories(path.parent, below=within)
    _make_parent(path)
    _own_lock_file(path, _lstat(path))  # busy or not: a shared file is no comment's own lock
    lock = FileLock(path, thread_local=False, fallback_to_soft=False, preserve_lock_file=True)
    try:
        lock.acquire(blocking=False)
    except Timeout:
        return None
    except OSError as exc:
        raise _cannot_lock(path, exc) from exc
    fd = lock._context.lock_file_fd
    held = os.fstat(fd) if fd is not None else None
    at_path = _lstat(path)
    if held is None or at_path is None or not os.path.samestat(held, at_path):
        lock.release()  # the file was replaced between its open and its flock: not the lock
        return None
    try:
        _own_lock_file(path, held)
    except UnsafePath:
        lock.release()
        raise
    return CallLock(lock, fd, held)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _cannot_lock(path, exc) from exc


def _own_lock_file(path: Path, st: os.stat_result | None) -> None:
    """A call lock excludes only when its file is this comment's alone: a file hard-linked to
    another comment's lock would make one comment's call look like the other's, and a call for
    a comment with no attempt yet look like a run's (tests/test_redteam_locks.py)."""
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise UnsafePath(
            path,
            f"a lock file with {st.st_nlink} names (hard links): another comment's call lock "
            "would be this one's",
            fix="remove it and its other names (watcher creates a fresh lock file)",
        )


def make_call_locks(paths: Sequence[Path], *, within: Path | None = None) -> None:
    """Create the lock files of calls about to be made, all in a row, before any is taken.

    Only a speed-up, so it never fails: whatever goes wrong here (a link planted at ``locks/calls``,
    a read-only disk) is met again, and reported, where each lock is taken (:func:`try_call_lock`).
    A file created between a comment's durable writes (1.5–1.7 ms on ext4) made the write after
    it ~1 ms slower; created in a row before the run's first write, each costs 0.03–0.09 ms."""
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
    there, and a dry run (which writes nothing) may ask too. A probe, not a wait: filelock's
    :func:`~filelock.lock_descriptor` on a descriptor opened without ``O_CREAT``."""
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


# What a call lock says of an open reservation (:func:`call_lock_state`).
CallLockState = Literal["held", "free", "not_its"]


def call_lock_state(path: Path, token: str, *, within: Path | None = None) -> CallLockState:
    """What the lock at ``path`` says of the open reservation named by ``token`` (SPEC §15.1):

    - ``held``: another open file description holds it now: a call is in flight;
    - ``free``: nobody holds it and it carries the reservation's stamp (:meth:`CallLock.stamp`):
      the reservation was made under this very file, and the kernel released it, so its process
      died (or let go without writing the outcome);
    - ``not_its``: no file, or a free file without that stamp: removed or replaced since (or
      stamped by no one), so its being free says nothing of the reservation's call.

    A probe like :func:`held_elsewhere`: creates nothing, waits for nothing."""
    from filelock import lock_descriptor, unlock_descriptor

    if within is not None:
        real_directories(path.parent, below=within)
    try:
        fd = os.open(path, _OPEN_FLAGS & ~os.O_CREAT)
    except FileNotFoundError:
        return "not_its"
    except OSError as exc:
        raise _cannot_lock(path, exc) from exc
    try:
        if not lock_descriptor(fd, blocking=False):
            return "held"
        try:
            st = os.fstat(fd)
            data = os.pread(fd, _STAMP_MAX, 0)
        finally:
            unlock_descriptor(fd)
    except OSError as exc:
        raise _cannot_lock(path, exc) from exc
    finally:
        os.close(fd)
    return "free" if data == stamp_of(token, st).encode() else "not_its"


# A stamp is a pid, an attempt number, a timestamp and an identity: far below this.
_STAMP_MAX = 512


def seen_lock(paths: Paths) -> AbstractContextManager[None]:
    """Held only for one read-merge-write of seen.json, never across a model call."""
    return hold(paths.seen_lock_file, timeout=SHORT_WAIT_S, within=paths.user_part)


def signals_lock(paths: Paths) -> AbstractContextManager[None]:
    """Held for one append to observations.jsonl or one counter state update."""
    return hold(paths.signals_lock_file, timeout=SHORT_WAIT_S, within=paths.user_part)
