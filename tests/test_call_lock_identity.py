"""SPEC §15.1: a call lock vouches only for the reservation made under it.

A run that finds a comment's attempt reserved (``outcome: null``) asks its call lock: held, the
call is in flight; free, its process died. A lock file removed or replaced during the call is
another file whose lock says nothing of that call, so it is never taken for "the caller died":
the comment is left as busy (``deferred``) while the reservation's process runs, and closed as
``interrupted`` once it is gone — never a second call beside the first. Real processes against a
loopback provider that counts the requests it is answering at once.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from _fakes.clock import later
from _fakes.provider import FakeProvider, running_fake
from _proc import envelope, run, run_main, start, write_export

from watcher.config import Paths
from watcher.pipeline import Hooks
from watcher.state import records
from watcher.store.files import FileStore
from watcher.util.timeutil import utcnow

pytestmark = pytest.mark.slow


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as provider:
        yield provider


def _failed_once(data_dir: Path, fake: FakeProvider, tmp_path: Path) -> None:
    """A comment ``first`` whose first attempt failed (malformed JSON); the call log cleared."""
    export = write_export(tmp_path / "export.json", ["first"])
    fake.script("first", "malformed")
    done = run_main("cli", "scan", "--source", str(export), "--json", data_dir=data_dir, env=fake.env())
    assert done.returncode == 0, done.stderr
    fake.calls.clear()


def _outcomes(proc) -> list[str]:  # type: ignore[no-untyped-def]
    return [item["outcome"] for item in envelope(proc)["result"]["items"]]


def _lock(data_dir: Path) -> Path:
    return Paths(data_dir).call_lock_file("first")


def _remove(lock: Path) -> None:
    lock.unlink()


def _recreate_empty(lock: Path) -> None:
    lock.unlink()
    lock.write_bytes(b"")


def _copy(lock: Path) -> None:
    """A copy of the lock file (a restored backup): the same text, another file."""
    text = lock.read_bytes()
    lock.unlink()
    lock.write_bytes(text)


@pytest.mark.parametrize("change", [_remove, _recreate_empty, _copy], ids=["removed", "recreated", "copied"])
def test_a_call_lock_changed_during_the_call_lets_no_second_call_out(
        data_dir: Path, fake: FakeProvider, tmp_path: Path, change) -> None:  # type: ignore[no-untyped-def]
    """The lock file changed under a call in flight: later runs defer the comment; one request."""
    _failed_once(data_dir, fake, tmp_path)
    fake.script("first", "hold", "verdict")
    first = start("cli", "recheck", "--json", data_dir=data_dir, env=fake.env())
    fake.wait_in_flight()
    change(_lock(data_dir))
    during = [run(entry, "recheck", "--json", data_dir=data_dir, env=fake.env()) for entry in ("bridge", "cli")]
    fake.release()
    out = first.communicate(timeout=30)
    assert (fake.calls, fake.max_active) == (["first"], 1)
    assert first.returncode == 0, out
    assert [_outcomes(proc) for proc in during] == [["deferred"], ["deferred"]]
    message = envelope(during[0])["result"]["items"][0]["message"]
    assert f"pid {first.pid}" in message and "not the one it was reserved under" in message
    record = FileStore(Paths(data_dir)).load_record("first")
    assert record is not None and record.verdict is not None and len(record.attempts) == 2


def test_a_caller_that_died_with_its_lock_removed_is_closed_as_interrupted(
        data_dir: Path, fake: FakeProvider, tmp_path: Path) -> None:
    """Killed during its call, its lock file then removed: the next run records interrupted."""
    _failed_once(data_dir, fake, tmp_path)
    fake.script("first", "hold", "verdict")
    first = start("cli", "recheck", "--json", data_dir=data_dir, env=fake.env())
    fake.wait_in_flight()
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    fake.release()
    _lock(data_dir).unlink()
    after = run("cli", "recheck", "--json", data_dir=data_dir, env=fake.env())
    assert after.returncode == 0, after.stderr
    assert _outcomes(after) == ["interrupted"]
    assert fake.calls == ["first"]
    record = FileStore(Paths(data_dir)).load_record("first")
    assert record is not None and [a.error.kind for a in record.attempts if a.error] == [
        "malformed_json", "interrupted"]


def test_a_reservation_without_its_lock_is_busy_until_the_age_bound(
        data_dir: Path, fake: FakeProvider, tmp_path: Path) -> None:
    """A live pid's reservation with no lock file: deferred now, interrupted two hours on."""
    _failed_once(data_dir, fake, tmp_path)
    store = FileStore(Paths(data_dir))
    record = store.load_record("first")
    assert record is not None
    store.save_record(records.reserve(record, command="recheck", entrypoint="cli", provider="openai",
                                      model="fake-model", pid=os.getpid()))  # this process: it runs
    now = run_main("cli", "recheck", "--json", data_dir=data_dir, env=fake.env())
    assert _outcomes(now) == ["deferred"], now.stdout
    late = run_main("cli", "recheck", "--json", data_dir=data_dir, env=fake.env(),
                    hooks=Hooks(clock=later(timedelta(hours=2, minutes=1))))
    assert _outcomes(late) == ["interrupted"], late.stdout
    assert fake.calls == []


def test_a_pid_that_started_after_the_reservation_is_not_its_process(data_dir: Path) -> None:
    """The reservation's pid now names a process started later (a reused pid): its writer is gone."""
    store = FileStore(Paths(data_dir))
    assert store.process_gone(os.getpid(), utcnow() - timedelta(days=1))
    assert not store.process_gone(os.getpid(), utcnow())
