"""SPEC §13.5–§13.6: state that others touched, and a person who stops a run.

Real processes where the process is the point (a deleted lock file, a signal, a closed pipe);
in-process runs with the injected fake where only the pipeline's decision is under test.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks, running_fake
from _proc import command, env_for, envelope, run, run_main, start, write_export

from watcher.state import records
from watcher.config import Paths
from watcher.errors import SaveFailed
from watcher.pipeline import Hooks
from watcher.store.files import FileStore


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as provider:
        yield provider


def _watcher(data_dir: Path, fake: FakeProvider, *args: str, **hooks: Any) -> dict[str, Any]:
    """`watcher ARGS --json` in this process, its model calls to ``fake``: the envelope."""
    done = run_main("cli", *args, "--json", data_dir=data_dir, env=IN_PROCESS_ENV, hooks=in_process_hooks(fake, **hooks))
    assert done.envelope is not None and done.envelope["exit_code"] == done.returncode, done.stderr
    return done.envelope


def _record(data_dir: Path, cid: str):  # type: ignore[no-untyped-def]
    record = FileStore(Paths(data_dir)).load_record(cid)
    assert record is not None
    return record


@pytest.mark.slow
def test_deleting_the_lock_files_mid_call_cannot_buy_a_fourth_call(
        data_dir: Path, fake: FakeProvider, tmp_path: Path) -> None:
    """A slow recheck's call is out; the user deletes locks/pipeline.lock and the comment's call
    lock; two more rechecks run meanwhile and leave the comment as busy: the call lock they find
    is not the one its attempt was reserved under, and the process that reserved it still runs
    (SPEC §15.1; tests/test_call_lock_identity.py). The comment gets 3 calls in all, never two at
    once.

    The runs around the slow one are processes; the scan before and the rechecks after, there
    only to spend and then exhaust the budget, run the CLI's ``main`` in this process."""
    export = write_export(tmp_path / "export.json", ["slow"])
    fake.script("slow", "malformed", "hold-malformed", "malformed")
    assert run_main("cli", "scan", "--source", str(export), data_dir=data_dir, env=fake.env()).returncode == 0
    first = start("cli", "recheck", "--json", data_dir=data_dir, env=fake.env())
    fake.wait_in_flight()
    Paths(data_dir).pipeline_lock_file.unlink()  # "they looked stale"
    Paths(data_dir).call_lock_file("slow").unlink()
    during = run("cli", "recheck", "--json", data_dir=data_dir, env=fake.env())
    assert envelope(during)["result"]["items"][0]["outcome"] == "deferred"
    again = run("bridge", "recheck", data_dir=data_dir, env=fake.env())
    assert envelope(again)["result"]["calls"] == 0
    fake.release()
    out = first.communicate(timeout=30)
    assert first.returncode == 0, out
    for _ in range(3):
        run_main("cli", "recheck", data_dir=data_dir, env=fake.env())
    assert (fake.calls, fake.max_active) == (["slow"] * 3, 1)
    assert len(_record(data_dir, "slow").attempts) == 3


def test_an_inbox_file_restored_from_an_older_copy_cannot_reopen_a_spent_budget(
        data_dir: Path, tmp_path: Path) -> None:
    """The attempts that count are max(inbox, seen.json): a restored 1-attempt file of a comment
    seen.json counts 3 attempts for is exhausted, not retried."""
    fake = FakeProvider()
    fake.script("old1", "malformed")
    _watcher(data_dir, fake, "scan", "--source", str(write_export(tmp_path / "e.json", ["old1"])))
    path = Paths(data_dir).inbox_file("old1")
    backup = path.read_bytes()
    _watcher(data_dir, fake, "recheck")
    _watcher(data_dir, fake, "recheck")
    assert fake.calls == ["old1"] * 3
    path.write_bytes(backup)  # restored from last week's backup: 1 attempt
    out = _watcher(data_dir, fake, "recheck")
    assert fake.calls == ["old1"] * 3
    assert [i["outcome"] for i in out["result"]["items"]] == ["exhausted"]


def test_scan_closes_an_orphaned_reservation_it_meets(data_dir: Path, tmp_path: Path) -> None:
    """A run killed mid-call left attempt 1 reserved: the next scan (not only recheck) closes it as
    interrupted, without calling for it."""
    fake = FakeProvider()
    export = write_export(tmp_path / "e.json", ["orf", "new"])
    _watcher(data_dir, fake, "scan", "--source", str(export), "--limit", "1")  # oldest first: orf
    paths = Paths(data_dir)
    record = _record(data_dir, "new")
    FileStore(paths).save_record(records.reserve(record, command="scan", entrypoint="cli", provider="openai",
                                    model="fake-model", pid=999_999))
    out = _watcher(data_dir, fake, "scan", "--source", str(export))
    assert [(i["id"], i["outcome"]) for i in out["result"]["items"]] == [("new", "interrupted")]
    assert fake.calls == ["orf"] and _record(data_dir, "new").attempts[-1].error.kind == "interrupted"


def test_a_failed_index_save_still_reports_the_batch(data_dir: Path, tmp_path: Path) -> None:
    """Calls made, verdicts saved, then seen.json cannot be written: exit 5, but the summary of the
    calls is still there (the table is printed)."""
    fake = FakeProvider()

    class IndexUnwritable(FileStore):
        def save_index(self, base, mine, patches=None):  # type: ignore[no-untyped-def]
            if mine.comments:
                raise SaveFailed(self.paths.seen, PermissionError(13, "Permission denied"))
            return super().save_index(base, mine, patches)

    export = write_export(tmp_path / "e.json", ["s1", "s2"])
    out = _watcher(data_dir, fake, "scan", "--source", str(export), make_store=IndexUnwritable)
    assert out["exit_code"] == 5 and out["error"]["kind"] == "save_failed"
    assert out["result"]["calls"] == 2 and [i["outcome"] for i in out["result"]["items"]] == ["verdict"] * 2


def test_an_oserror_while_reporting_a_failure_still_gives_one_envelope(data_dir: Path) -> None:
    """A corrupt file on a read-only mount: recording the observation fails with an OSError, and the
    command still answers with exactly its envelope (exit 5), never a traceback."""
    appends: list[object] = []

    class ReadOnlyLog(FileStore):
        def append_signals(self, events):  # type: ignore[no-untyped-def]
            appends.append(events)
            raise PermissionError(13, "Read-only file system")

    Paths(data_dir).seen.write_text("not valid JSON")
    done = run_main("cli", "status", "--json", data_dir=data_dir, hooks=Hooks(make_store=ReadOnlyLog))
    assert appends  # the state.quarantined observation was tried, and failed
    assert done.envelope is not None and done.stdout.count('"exit_code"') == 1
    assert (done.returncode, done.envelope["exit_code"], done.envelope["error"]["kind"]) == (5, 5, "corrupt_state")
    assert "Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_a_call_records_interrupted_at_once_and_prints_the_summary(
        data_dir: Path, fake: FakeProvider, tmp_path: Path, sig: int, code: int) -> None:
    """Ctrl-C / SIGTERM while the provider holds the request: the attempt is closed as interrupted
    (still counted) before the process exits 130/143 with its summary; the rest are not_started."""
    export = write_export(tmp_path / "e.json", ["held", "next"])
    fake.script("held", "hold")
    proc = start("cli", "scan", "--source", str(export), "--json", data_dir=data_dir, env=fake.env())
    fake.wait_in_flight()
    proc.send_signal(sig)
    out = proc.communicate(timeout=30)
    assert proc.returncode == code, out
    doc = envelope(out)
    assert doc["error"]["kind"] == "interrupted"
    assert [(i["id"], i["outcome"]) for i in doc["result"]["items"]] == [("held", "interrupted"),
                                                                          ("next", "not_started")]
    record = _record(data_dir, "held")
    assert [(a.outcome, a.error.kind if a.error else None) for a in record.attempts] == [("error", "interrupted")]
    fake.release()
    assert fake.calls == ["held"]


def _stops_blocked_by(thread: threading.Thread) -> set[int]:
    """Which of SIGINT and SIGTERM ``thread`` blocks, from its ``SigBlk`` in /proc."""
    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    mask = int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)
    return {sig for sig in (signal.SIGINT, signal.SIGTERM) if mask >> (sig - 1) & 1}


@pytest.mark.skipif(sys.platform != "linux", reason="reads a thread's signal mask from /proc")
def test_watchers_helper_threads_never_take_sigint_or_sigterm(data_dir: Path, fake: FakeProvider,
                                                              tmp_path: Path) -> None:
    """A signal sent to the process goes to any thread that does not block it, and Python's handler
    then waits for the main thread, which a model call's recv keeps asleep until its deadline: the
    scan of the test above hung so 3 times in 300 under load. The deadline thread and the call workers
    block both, and the main thread still takes them."""
    from watcher.providers import make_provider

    masks: list[tuple[str, set[int]]] = []

    class MaskNoting:
        """The real provider, noting the signal mask of the thread each call is made on."""

        def __init__(self, settings: Any) -> None:
            self._real = make_provider(settings)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._real, name)

        def complete(self, prompt: Any) -> Any:
            masks.append((threading.current_thread().name, set(signal.pthread_sigmask(signal.SIG_BLOCK, []))))
            return self._real.complete(prompt)

    export = write_export(tmp_path / "e.json", ["a1", "a2", "a3"])
    done = run_main("cli", "scan", "--source", str(export), "--json", data_dir=data_dir,
                    env={**fake.env(), "WATCHER_PARALLEL": "2"}, hooks=Hooks(make_provider=MaskNoting))
    assert done.returncode == 0, done.stderr
    stops = {signal.SIGINT, signal.SIGTERM}
    assert len(masks) == 3 and all(name.startswith("watcher-call-") and stops <= mask for name, mask in masks), masks
    (clock,) = [t for t in threading.enumerate() if t.name == "watcher-deadlines"]
    assert _stops_blocked_by(clock) == stops
    assert not stops & set(signal.pthread_sigmask(signal.SIG_BLOCK, []))


@pytest.mark.slow
@pytest.mark.parametrize("args", [("cli", "status"), ("cli", "status", "--json"), ("bridge", "status")])
def test_a_closed_stdout_ends_quietly(data_dir: Path, args: tuple[str, ...]) -> None:
    """`watcher status | head -0`: no traceback, the command's own exit code, not 1."""
    proc = subprocess.Popen(command(*args), env=env_for(data_dir), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader went away before reading anything
    err = proc.stderr.read().decode()
    proc.wait(30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_a_symlinked_observation_log_is_never_written_through(data_dir: Path, tmp_path: Path) -> None:
    """observations.jsonl planted as a symlink to a file outside the data dir: nothing is ever
    appended there; the run says which path is wrong (exit 5) instead."""
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched\n")
    (data_dir / "observations.jsonl").symlink_to(outside)
    fake = FakeProvider()
    out = _watcher(data_dir, fake, "scan", "--source", str(write_export(tmp_path / "e.json", ["l1"])))
    assert outside.read_text() == "untouched\n"
    assert out["exit_code"] == 5 and "observations.jsonl" in out["error"]["message"]
    record = _record(data_dir, "l1")
    assert record.verdict is not None  # the batch itself went through; only the signal was refused
