"""SPEC §15.1: a comment's call lock is its own file. Two comments' lock files hard-linked together
(one file under two names) would make one comment's call hold the other's lock: the scan stops
with exit 5 naming the file, before any attempt is spent, instead of an internal error. A lock
that another process holds when a run goes to take it leaves the comment for the next run, with
or without an attempt behind it."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from _proc import envelope, run, run_main, write_export

from watcher.config import Paths
from watcher.store.files import FileStore


def test_hard_linked_call_locks_stop_the_scan_with_exit_5_and_spend_nothing(data_dir: Path, tmp_path: Path) -> None:
    """aa1's and bb2's lock files are one file: `scan --parallel 2` exits 5 naming it, no attempt."""
    export = write_export(tmp_path / "export.json", ["aa1", "bb2", "cc3"])
    calls = data_dir / "locks" / "calls"
    calls.mkdir(parents=True)
    (calls / "aa1.lock").write_bytes(b"")
    os.link(calls / "aa1.lock", calls / "bb2.lock")
    proc = run("cli", "scan", "--source", str(export), "--parallel", "2", "--json", data_dir=data_dir,
               env={"WATCHER_PROVIDER": "offline"})
    out = envelope(proc)
    assert (proc.returncode, out["error"]["kind"]) == (5, "unsafe_path"), out["error"]
    assert "hard links" in out["error"]["message"] and "aa1.lock" in out["error"]["message"]
    store = FileStore(Paths(data_dir))
    for cid in ("aa1", "bb2", "cc3"):
        record = store.load_record(cid)
        assert record is None or not record.attempts, cid


def test_a_busy_call_lock_of_a_comment_never_attempted_defers_it(data_dir: Path, tmp_path: Path) -> None:
    """Another process holds a new comment's call lock: the scan defers it (exit 0), no attempt."""
    export = write_export(tmp_path / "export.json", ["aa1"])
    lock = Paths(data_dir).call_lock_file("aa1")
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # an open file description of its own, as another process's
        busy = run_main("cli", "scan", "--source", str(export), "--json", data_dir=data_dir,
                        env={"WATCHER_PROVIDER": "offline"})
    finally:
        os.close(fd)
    assert busy.returncode == 0, busy.stderr
    item = envelope(busy)["result"]["items"][0]
    assert (item["outcome"], item["attempts"]) == ("deferred", 0)
    assert "aa1.lock" in item["message"] and "held by another process" in item["message"]
    record = FileStore(Paths(data_dir)).load_record("aa1")
    assert record is not None and not record.attempts
