"""Locks (SPEC §4, §7 step 2): the pipeline lock waits 5 s then fails loudly; a SIGKILLed holder
frees it; lock files are never deleted.

The real 5 s wait is proved once, end to end, in test_pipeline_processes.py; here the wait is
lowered through ``watcher.locks.PIPELINE_WAIT_S``, which ``FileStore.pipeline_lock`` reads at call time."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _forkserver import ForkedProcess
from _proc import script

from watcher.config import Paths
from watcher.errors import EXIT_LOCK_BUSY, LockBusy
from watcher.store import locks
from watcher.store.files import FileStore
from watcher.store.locks import PIPELINE_WAIT_S, hold, seen_lock, signals_lock

WORKER = Path(__file__).with_name("_lock_worker.py")


@pytest.fixture
def holder(paths: Paths, tmp_path: Path) -> Iterator[subprocess.Popen[str] | ForkedProcess]:
    """Another process holding the pipeline lock (killed at teardown if still alive)."""
    held = tmp_path / "held"
    proc = script(WORKER, "hold", str(paths.root), str(held), stdout=None, stderr=None)
    deadline = time.monotonic() + 30
    while not held.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "holder never took the lock"
        time.sleep(0.01)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def _try_in_subprocess(paths: Paths, wait_s: float) -> tuple[int, dict[str, object]]:
    proc = script(WORKER, "try", str(paths.root), str(wait_s))
    out, _err = proc.communicate(timeout=60)
    return proc.returncode, json.loads(out)


def test_second_process_fails_after_the_wait_with_the_lock_busy_message(
    paths: Paths, holder: subprocess.Popen[str] | ForkedProcess
) -> None:
    """While one process holds it, another waits the whole wait, then exits 4 with SPEC §7's message."""
    code, report = _try_in_subprocess(paths, 0.5)
    assert code == EXIT_LOCK_BUSY
    assert report["acquired"] is False
    assert 0.5 <= float(report["elapsed"]) <= 3.5  # type: ignore[arg-type]
    assert report["message"] == (
        f"pipeline lock busy: another watcher run holds {paths.pipeline_lock} (waited 0.5 s)"
    )


def test_the_pipeline_wait_is_read_when_the_lock_is_taken(
    paths: Paths, holder: subprocess.Popen[str] | ForkedProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's pipeline lock reads PIPELINE_WAIT_S at call time, not at import (the tests' seam)."""
    monkeypatch.setattr(locks, "PIPELINE_WAIT_S", 0.2)
    began = time.monotonic()
    with pytest.raises(LockBusy) as info, FileStore(paths).pipeline_lock():
        pass
    assert info.value.waited_s == 0.2 and time.monotonic() - began >= 0.2
    assert str(info.value).endswith("(waited 0.2 s)")


def test_sigkilled_holder_frees_the_lock_and_the_file_stays(
    paths: Paths, holder: subprocess.Popen[str] | ForkedProcess
) -> None:
    """After SIGKILL of the holder, a zero-wait acquire succeeds and the lock file still exists."""
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)
    with FileStore(paths).pipeline_lock(timeout=0):
        assert paths.pipeline_lock.exists()
    assert paths.pipeline_lock.exists()


def test_pipeline_wait_is_5_seconds() -> None:
    """The documented wait (SPEC §7 step 2)."""
    assert PIPELINE_WAIT_S == 5.0


def test_release_keeps_the_lock_file(paths: Paths) -> None:
    """Lock files are never deleted, not even on a clean release."""
    for take, path in ((lambda p: FileStore(p).pipeline_lock(), paths.pipeline_lock), (seen_lock, paths.seen_lock),
                       (signals_lock, paths.signals_lock)):
        with take(paths):
            pass
        assert path.exists(), path


def test_released_lock_can_be_taken_again_at_once(paths: Paths) -> None:
    """A release really releases: while the first store keeps its descriptor open, another store's
    zero-wait acquire succeeds (a second hold by the same store would share its flock)."""
    store = FileStore(paths)
    with store.pipeline_lock():
        pass
    with FileStore(paths).pipeline_lock(timeout=0):
        pass
    with store.pipeline_lock(timeout=0):
        pass


def test_lock_is_released_when_the_body_raises(paths: Paths) -> None:
    """An exception inside the locked block still releases the lock, kept descriptor and all."""
    store = FileStore(paths)
    with pytest.raises(RuntimeError), store.pipeline_lock():
        raise RuntimeError("boom")
    with FileStore(paths).pipeline_lock(timeout=0):
        pass
    with store.pipeline_lock(timeout=0):
        pass


def test_busy_error_names_lock_path_and_wait(paths: Paths, holder: subprocess.Popen[str] | ForkedProcess) -> None:
    """LockBusy carries the path and the seconds waited, and maps to exit 4."""
    with pytest.raises(LockBusy) as info, hold(paths.pipeline_lock, timeout=0.2):
        pass
    assert info.value.path == paths.pipeline_lock
    assert info.value.waited_s == 0.2
    assert info.value.exit_code == EXIT_LOCK_BUSY
    assert str(info.value).startswith("pipeline lock busy: another watcher run holds ")


def test_seen_lock_is_independent_of_the_pipeline_lock(paths: Paths, holder: subprocess.Popen[str] | ForkedProcess) -> None:
    """`watcher mark` needs only the seen lock: it works while a batch holds the pipeline lock."""
    with seen_lock(paths):
        pass


def test_a_filelock_holder_excludes_us_and_we_exclude_it(paths: Paths) -> None:
    """``hold`` takes filelock's own native lock: a ``FileLock`` on the same file and ``hold``
    exclude each other both ways."""
    from filelock import FileLock, Timeout

    paths.pipeline_lock.parent.mkdir(parents=True)
    with FileLock(str(paths.pipeline_lock)), pytest.raises(LockBusy), hold(paths.pipeline_lock, timeout=0.05):
        pass
    with hold(paths.pipeline_lock, timeout=0), pytest.raises(Timeout):
        FileLock(str(paths.pipeline_lock), timeout=0.05).acquire()


def test_a_lock_file_unlinked_while_waited_for_is_taken_afresh(paths: Paths,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A waiter whose lock file was deleted under it (by hand) locks the new file at the name,
    not the orphaned inode, so it still excludes whoever opens the name next."""
    from filelock import FileLock, Timeout

    path = paths.signals_lock
    holding, release, inside, waiting = (threading.Event() for _ in range(4))
    seen: list[bool] = []
    real_sleep = time.sleep

    def pause(seconds: float) -> None:  # hold() sleeps only between tries of a busy lock
        waiting.set()
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", pause)

    def first() -> None:
        with hold(path, timeout=5):
            holding.set()
            release.wait(10)

    def second() -> None:
        with hold(path, timeout=10):
            try:
                FileLock(str(path), timeout=0).acquire()
                seen.append(False)  # the name's file was free: we held an orphan
            except Timeout:
                seen.append(True)
            inside.set()

    one = threading.Thread(target=first)
    one.start()
    assert holding.wait(10)
    two = threading.Thread(target=second)
    two.start()
    assert waiting.wait(10)  # the second one has the first inode open and is waiting on it
    path.unlink()
    release.set()
    one.join(10)
    two.join(10)
    assert inside.is_set() and seen == [True]
    assert path.exists()


# ---- a store's kept lock (watcher.store.locks.KeptLock) ------------------------------------------


def test_a_store_opens_its_pipeline_and_signals_locks_once_per_command(paths: Paths,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A run holds the pipeline lock twice per model call and the signals lock once: the store
    keeps each lock file open between holds instead of opening, checking and closing it each time
    (bench/run.py figure 1). Each hold still really locks and really releases."""
    from filelock import FileLock, Timeout

    from watcher.store.files import FileStore

    opened: list[Path] = []
    real_open = locks._open
    monkeypatch.setattr(locks, "_open", lambda path: opened.append(path) or real_open(path))
    store = FileStore(paths)
    for _ in range(5):
        with store.pipeline_lock(timeout=0), pytest.raises(Timeout):  # held: another description is kept out
            FileLock(str(paths.pipeline_lock), timeout=0).acquire()
        with FileLock(str(paths.pipeline_lock), timeout=0):  # released between holds
            pass
        store.append_signals([{"key": "verdict.ok"}])
    assert opened == [paths.pipeline_lock, paths.signals_lock]


def test_a_kept_lock_whose_file_was_unlinked_locks_the_new_file(paths: Paths) -> None:
    """The kept descriptor is of an inode: once someone deletes the lock file and another run
    creates and holds a new one at the name, the store's next hold must wait for that run, not
    lock the orphan it kept."""
    from filelock import FileLock

    from watcher.store.files import FileStore

    store = FileStore(paths)
    with store.pipeline_lock(timeout=0):
        pass
    paths.pipeline_lock.unlink()
    with FileLock(str(paths.pipeline_lock)), pytest.raises(LockBusy), store.pipeline_lock(timeout=0.05):
        pass
    with store.pipeline_lock(timeout=0):
        pass
    assert paths.pipeline_lock.exists()


def test_a_kept_lock_held_on_one_thread_excludes_another_thread_of_the_same_store(paths: Paths) -> None:
    """``flock`` excludes open file descriptions, not threads: a second hold while the kept
    descriptor is in use must open its own, or it would "take" the lock at once, held or not."""
    from watcher.store.files import FileStore

    store = FileStore(paths)
    with store.pipeline_lock(timeout=0):
        pass  # the descriptor is kept from here on
    holding, release = threading.Event(), threading.Event()
    outcome: list[str] = []

    def first() -> None:
        with store.pipeline_lock(timeout=0):
            holding.set()
            release.wait(10)

    one = threading.Thread(target=first)
    one.start()
    assert holding.wait(10)
    try:
        with store.pipeline_lock(timeout=0.05):
            outcome.append("taken while held")
    except LockBusy:
        outcome.append("busy")
    with pytest.raises(LockBusy), store.pipeline_lock(timeout=0.05), store.pipeline_lock(timeout=0.05):
        pass  # nested on one thread: as busy as any other holder (and not a deadlock)
    release.set()
    one.join(10)
    assert outcome == ["busy"]
    with store.pipeline_lock(timeout=0):
        pass


def test_a_forked_child_does_not_share_the_parents_kept_lock(paths: Paths, tmp_path: Path) -> None:
    """A child forked while the store keeps its descriptor shares the parent's open file
    description, and with it the flock: the child's hold must open its own, so that parent and
    child exclude each other."""
    import os

    from watcher.store.files import FileStore

    store = FileStore(paths)
    with store.pipeline_lock(timeout=0):
        pass  # the descriptor is kept now, and not locked
    verdict = tmp_path / "child"
    held_r, held_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: waits until the parent holds the lock through its kept descriptor
        try:
            os.read(held_r, 1)
            try:
                with store.pipeline_lock(timeout=0.05):
                    verdict.write_text("taken while the parent held it")
            except LockBusy:
                verdict.write_text("busy")
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, never raised in a fork
            verdict.write_text(repr(exc))
        finally:
            os.write(done_w, b"x")
            os._exit(0)
    try:
        with store.pipeline_lock(timeout=0):
            os.write(held_w, b"x")
            os.read(done_r, 1)
    finally:
        _, status = os.waitpid(pid, 0)
        for fd in (held_r, held_w, done_r, done_w):
            os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    assert verdict.read_text() == "busy"
    with store.pipeline_lock(timeout=0):  # the parent's kept descriptor is still its own
        pass
