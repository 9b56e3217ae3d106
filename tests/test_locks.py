"""Locks (SPEC §4, §7 step 2, §16.3, §16.6): a command waits 5 s for the pipeline lock in all, then
fails loudly; a signal ends the wait at once; a SIGKILLed holder frees it; lock files are never
deleted.

The real 5 s wait is proved once, end to end, in test_pipeline_processes.py; here the store is
given a shorter one (``FileStore(paths, lock_wait=…)``)."""

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
from watcher.store.files import FileStore
from watcher.store.locks import PIPELINE_WAIT_S, hold, seen_lock, signals_lock

WORKER = Path(__file__).with_name("_lock_worker.py")


def _holding(paths: Paths, tmp_path: Path) -> subprocess.Popen[str] | ForkedProcess:
    """Another process, holding the pipeline lock once this returns."""
    held = tmp_path / "held"
    proc = script(WORKER, "hold", str(paths.root), str(held), stdout=None, stderr=None)
    deadline = time.monotonic() + 30
    while not held.exists():  # polling for the holder's own word, not waiting for time to pass
        assert proc.poll() is None and time.monotonic() < deadline, "holder never took the lock"
        time.sleep(0.01)
    return proc


@pytest.fixture
def holder(paths: Paths, tmp_path: Path) -> Iterator[subprocess.Popen[str] | ForkedProcess]:
    """Another process holding the pipeline lock (killed at teardown if still alive)."""
    proc = _holding(paths, tmp_path)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def _try_in_subprocess(paths: Paths, budget: float, *timeouts: float) -> tuple[int, list[dict[str, object]]]:
    proc = script(WORKER, "try", str(paths.root), str(budget), *map(str, timeouts))
    out, _err = proc.communicate(timeout=60)
    return proc.returncode, [json.loads(line) for line in out.splitlines()]


def test_second_process_fails_after_the_wait_with_the_lock_busy_message(
    paths: Paths, holder: subprocess.Popen[str] | ForkedProcess
) -> None:
    """While one process holds it, another waits the whole wait, then exits 4 with SPEC §7's message."""
    code, (report,) = _try_in_subprocess(paths, 0.5)
    assert code == EXIT_LOCK_BUSY
    assert report["acquired"] is False
    assert float(report["elapsed"]) >= 0.5  # type: ignore[arg-type]
    assert report["message"] == (
        f"pipeline lock busy: another watcher run holds {paths.pipeline_lock_file} (waited 0.5 s)"
    )


def test_every_wait_of_a_command_draws_from_one_budget(
    paths: Paths, holder: subprocess.Popen[str] | ForkedProcess
) -> None:
    """SPEC §16.3: a process whose store may wait 0.9 s in all, holding three times with 0.6 s
    each, waits 0.6 s, then the 0.3 s left, then not at all: 0.9 s in all, not 1.8 s."""
    code, reports = _try_in_subprocess(paths, 0.9, 0.6, 0.6, 0.6)
    assert code == EXIT_LOCK_BUSY
    assert [r["acquired"] for r in reports] == [False, False, False]
    assert [r["waited_s"] for r in reports] == [0.6, 0.9, 0.9]
    assert str(reports[1]["message"]).endswith("(waited 0.9 s)")


def test_a_stores_lock_wait_is_the_one_it_was_given(
    paths: Paths, holder: subprocess.Popen[str] | ForkedProcess
) -> None:
    """The store's pipeline lock waits what the store was made with (the seam tests lower it by)."""
    began = time.monotonic()
    with pytest.raises(LockBusy) as info, FileStore(paths, lock_wait=0.2).pipeline_lock():
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
        assert paths.pipeline_lock_file.exists()
    assert paths.pipeline_lock_file.exists()


def test_pipeline_wait_is_5_seconds() -> None:
    """The documented wait (SPEC §7 step 2)."""
    assert PIPELINE_WAIT_S == 5.0


def test_release_keeps_the_lock_file(paths: Paths) -> None:
    """Lock files are never deleted, not even on a clean release."""
    for take, path in ((lambda p: FileStore(p).pipeline_lock(), paths.pipeline_lock_file), (seen_lock, paths.seen_lock_file),
                       (signals_lock, paths.signals_lock_file)):
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
    with pytest.raises(LockBusy) as info, hold(paths.pipeline_lock_file, timeout=0.2):
        pass
    assert info.value.path == paths.pipeline_lock_file
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

    paths.pipeline_lock_file.parent.mkdir(parents=True)
    with FileLock(str(paths.pipeline_lock_file)), pytest.raises(LockBusy), hold(paths.pipeline_lock_file, timeout=0.05):
        pass
    with hold(paths.pipeline_lock_file, timeout=0), pytest.raises(Timeout):
        FileLock(str(paths.pipeline_lock_file), timeout=0.05).acquire()


def test_a_lock_file_unlinked_while_waited_for_is_taken_afresh(paths: Paths) -> None:
    """A waiter whose lock file was deleted under it (by hand) locks the new file at the name,
    not the orphaned inode, so it still excludes whoever opens the name next."""
    from filelock import FileLock, Timeout

    path = paths.signals_lock_file
    holding, release, inside, waiting = (threading.Event() for _ in range(4))
    seen: list[bool] = []

    def first() -> None:
        with hold(path, timeout=5):
            holding.set()
            release.wait(10)

    def second() -> None:
        with hold(path, timeout=10, on_wait=lambda _path: waiting.set()):
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
    assert waiting.wait(10)  # the second one found the first inode held and is waiting on it
    path.unlink()
    release.set()
    one.join(10)
    two.join(10)
    assert inside.is_set() and seen == [True]
    assert path.exists()


# ---- a store's holds, one after another ------------------------------------------------------------


def test_each_hold_of_a_store_locks_and_releases(paths: Paths) -> None:
    """A run holds the pipeline lock twice per model call and the signals lock once: each hold
    really locks (another open file description is kept out) and really releases."""
    from filelock import FileLock, Timeout

    store = FileStore(paths)
    for _ in range(5):
        with store.pipeline_lock(timeout=0), pytest.raises(Timeout):
            FileLock(str(paths.pipeline_lock_file), timeout=0).acquire()
        with FileLock(str(paths.pipeline_lock_file), timeout=0):  # released between holds
            pass
        store.append_signals([{"key": "verdict.ok"}])
        with FileLock(str(paths.signals_lock_file), timeout=0):
            pass


def test_a_store_whose_lock_file_was_unlinked_locks_the_new_file(paths: Paths) -> None:
    """Once someone deletes the lock file and another run creates and holds a new one at the name,
    the store's next hold must wait for that run, not lock the inode it held before."""
    from filelock import FileLock

    from watcher.store.files import FileStore

    store = FileStore(paths)
    with store.pipeline_lock(timeout=0):
        pass
    paths.pipeline_lock_file.unlink()
    with FileLock(str(paths.pipeline_lock_file)), pytest.raises(LockBusy), store.pipeline_lock(timeout=0.05):
        pass
    with store.pipeline_lock(timeout=0):
        pass
    assert paths.pipeline_lock_file.exists()


def test_a_hold_on_one_thread_excludes_another_thread_of_the_same_store(paths: Paths) -> None:
    """``flock`` excludes open file descriptions, not threads: a second hold while the first is in
    use must open its own, or it would "take" the lock at once, held or not (and a nested hold on
    one thread is as busy as any other holder: a lock the store would re-enter excludes no one)."""
    from watcher.store.files import FileStore

    store = FileStore(paths)
    with store.pipeline_lock(timeout=0):
        pass
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


def test_a_child_forked_while_the_parent_holds_the_lock_is_kept_out(paths: Paths, tmp_path: Path) -> None:
    """A child forked while the store holds the pipeline lock shares the parent's open file
    description, and with it the ``flock``: its own hold must still be busy, and its exit must
    not release the parent's lock."""
    import os

    from filelock import FileLock, Timeout

    store = FileStore(paths)
    verdict = tmp_path / "child"
    with store.pipeline_lock(timeout=0):
        pid = os.fork()
        if pid == 0:  # the child
            try:
                try:
                    with store.pipeline_lock(timeout=0.05):
                        verdict.write_text("taken while the parent held it")
                except LockBusy:
                    verdict.write_text("busy")
            except BaseException as exc:  # noqa: BLE001 - reported to the parent, never raised in a fork
                verdict.write_text(repr(exc))
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        with pytest.raises(Timeout):  # the child's exit released nothing
            FileLock(str(paths.pipeline_lock_file), timeout=0).acquire()
    assert os.waitstatus_to_exitcode(status) == 0
    assert verdict.read_text() == "busy"
    with FileStore(paths).pipeline_lock(timeout=0):  # released by the parent
        pass


# ---- a signal ends a lock wait (SPEC §16.6) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "signum", "code"), [("scan", signal.SIGTERM, 143), ("recheck", signal.SIGINT, 130)]
)
def test_a_signal_ends_a_commands_wait_for_the_lock_at_once(
    paths: Paths, tmp_path: Path, command: str, signum: signal.Signals, code: int
) -> None:
    """A run waiting for the pipeline lock held by another process is stopped by SIGTERM or
    SIGINT: it exits 143 / 130 (not 4 after its wait), reserves and calls nothing, and says so."""
    from _fakes.provider import running_fake
    from _proc import Notices, envelope, start, write_export

    notices = Notices(tmp_path / "notices")
    export = write_export(tmp_path / "export.json", ["q1"])
    with running_fake() as fake:
        if command == "recheck":  # a comment whose first attempt failed, to recheck
            fake.script("q1", "malformed")
            first = start("cli", "scan", "--source", str(export), data_dir=paths.root, env=fake.env())
            assert first.communicate(timeout=60) and first.returncode == 0
            fake.calls.clear()
        args = ("scan", "--source", str(export)) if command == "scan" else ("recheck", "q1")
        holder = _holding(paths, tmp_path)
        try:
            run = start("cli", *args, "--json", data_dir=paths.root, env=fake.env(),
                        fault="notify_at=lock_queued", notices=notices)
            notices.wait("lock_queued", run)
            run.send_signal(signum)
            out, err = run.communicate(timeout=30)
        finally:
            holder.kill()
            holder.wait(timeout=10)
        assert run.returncode == code, err
        doc = envelope((out, err))
        assert (doc["exit_code"], doc["error"]["kind"]) == (code, "interrupted")
        assert f"stopped by {signum.name} while waiting for the pipeline lock" in doc["error"]["message"]
        # A scan stops before it has made the comment's record; a recheck before it decides.
        items = (doc["result"] or {}).get("items", [])
        assert [i["outcome"] for i in items] == ([] if command == "scan" else ["not_started"])
        assert fake.calls == []
    if command == "scan":
        assert not paths.inbox_file("q1").exists()
    else:  # nothing reserved by the stopped run: the first scan's one attempt
        assert len(json.loads(paths.inbox_file("q1").read_text())["attempts"]) == 1
