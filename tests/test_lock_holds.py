"""SPEC §15.1: a hold of the pipeline lock is one decision or one write, and nothing else.

Every other run waits while one holds the lock (bench/concurrency.py measures those waits).
What a hold must not do: build a model's validator (a model is built on first use, and
InboxRecord alone is ~40 ms of CPU), write more than one record, or build the redaction of a
submitted verdict. The first test drives real processes, fresh ones, since a model once built
stays built in its process; the others count the writes of each hold in this process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _fakes.provider import running_fake
from _mirror import World, world
from _proc import FAULTS, envelope, run, write_export

from watcher.config import Paths
from watcher.models import InboxRecord
from watcher.store.files import FileStore

VERDICT = {"needs_reply": True, "category": "question", "priority": "normal", "summary": "asks how", "reply_hint": ""}


def test_no_command_builds_a_model_while_it_holds_the_pipeline_lock(tmp_path: Path) -> None:
    """Every command that takes the lock, each a fresh process: scan (create, reserve, outcome),
    recheck, a scan that meets an edit and a deletion, claim and submit, grant."""
    data, builds = tmp_path / "data", tmp_path / "locked-builds.txt"
    hook = {"WATCHER_TEST_LOCKED_BUILDS": str(builds), "PYTHONPATH": str(FAULTS)}
    labels = ["ok1", "bad1", "gone1", "edit1"]
    export = write_export(tmp_path / "export.json", labels)
    with running_fake() as fake:
        fake.script("bad1", "malformed", "malformed", "malformed")
        fake.script("gone1", "malformed")

        def watcher(*args: str, entry: str = "cli", agent: bool = False) -> dict[str, object]:
            env = {**fake.env(), **hook, **({"WATCHER_PROVIDER": "agent"} if agent else {})}
            out = envelope(run(entry, *args, "--json", data_dir=data, env=env) if entry == "cli"
                           else run(entry, *args, data_dir=data, env=env))
            assert out["exit_code"] == 0, out
            return out

        watcher("scan", "--source", str(export))
        watcher("recheck")
        doc = json.loads(export.read_text())
        comments = doc["articles"][0]["comments"]
        doc["articles"][0]["comments"] = [c for c in comments if c["id_code"] != "gone1"]
        doc["articles"][0]["comments_count"] -= 1
        for c in comments:
            if c["id_code"] == "edit1":
                c["body_html"] = "<p>TAG:edit2 Edited: and on macOS?</p>"
        export.write_text(json.dumps(doc))
        result = watcher("scan", "--source", str(export))["result"]
        assert isinstance(result, dict) and result["gone"] == ["gone1"] and result["edited"] == ["edit1"]
        watcher("recheck")
        assert fake.calls.count("bad1") == 3  # spent: the grant has something to give
        watcher("grant", "bad1", "--yes")
        claimed = watcher("claim", "--limit", "1", entry="bridge", agent=True)["result"]
        assert isinstance(claimed, dict) and [c["id"] for c in claimed["claimed"]] == ["bad1"], claimed  # granted
        first = claimed["claimed"][0]
        watcher("submit", first["id"], str(first["n"]), json.dumps(VERDICT), entry="bridge", agent=True)
    assert not builds.exists(), f"built under the pipeline lock: {builds.read_text().split()}"


class HoldCounting(FileStore):
    """The real store, recording which records each hold of the pipeline lock wrote."""

    def __init__(self, paths: Paths) -> None:
        super().__init__(paths)
        self.holds: list[list[str]] = []
        self.unlocked: list[str] = []
        self._holding = False

    @contextmanager
    def pipeline_lock(self, *, timeout: float | None = None) -> Iterator[None]:
        with super().pipeline_lock(timeout=timeout):
            self.holds.append([])
            self._holding = True
            try:
                yield
            finally:
                self._holding = False

    def save_record(self, record: InboxRecord) -> None:
        (self.holds[-1] if self._holding else self.unlocked).append(record.comment.id)
        super().save_record(record)


@pytest.fixture
def w(tmp_path: Path) -> Iterator[World]:
    with world(tmp_path) as account:
        yield account


def test_a_scan_that_meets_many_changes_writes_one_record_per_hold(w: World) -> None:
    """Four comments deleted or hidden and two edited since the last scan, and three new ones:
    each is written under a hold of its own, none outside the lock."""
    ids = [w.say(f"c{i}") for i in range(6)]
    w.json("scan")
    for cid in ids[:3]:
        w.forem.delete(cid)
    w.forem.hide(ids[3])
    w.forem.edit(ids[4], "TAG:e4 Edited: and on Windows?")
    w.forem.edit(ids[5], "TAG:e5 Edited: and on macOS?")
    for i in range(3):
        w.say(f"n{i}")
    stores: list[HoldCounting] = []

    def store(paths: Paths) -> HoldCounting:
        stores.append(HoldCounting(paths))
        return stores[-1]

    done = w.watcher("scan", "--json", make_store=store)
    assert done.envelope is not None and done.envelope["exit_code"] == 0, done.stderr
    result = done.envelope["result"]
    assert sorted(result["gone"]) == sorted(ids[:4]) and sorted(result["edited"]) == sorted(ids[4:])
    (counted,) = stores
    written = [cid for hold in counted.holds for cid in hold]
    assert len(written) >= 4 + 2 + 3 * 3  # every change, and each new comment created, reserved, answered
    assert max(len(hold) for hold in counted.holds) == 1, counted.holds
    assert counted.unlocked == []


def test_a_submit_checks_and_redacts_the_verdict_before_it_takes_the_lock(tmp_path: Path) -> None:
    """Building the redaction compiles a pattern from the configured keys: done under the lock,
    every other run would wait for it."""
    import sys
    from types import FrameType

    from _proc import run_main

    from watcher.pipeline import Hooks
    from watcher.providers import redact

    data = tmp_path / "data"
    write_export(tmp_path / "export.json", ["q1"])
    agent = {"WATCHER_PROVIDER": "agent", "WATCHER_API_KEY": "sk-test-a-key-to-redact"}
    assert run_main("cli", "scan", "--source", str(tmp_path / "export.json"), data_dir=data, env=agent).returncode == 0
    claimed = run_main("bridge", "claim", "--limit", "1", data_dir=data, env=agent).envelope
    assert claimed is not None
    (first,) = claimed["result"]["claimed"]
    stores: list[HoldCounting] = []
    built_under_lock: list[bool] = []
    building = redact.Redaction.__init__.__code__

    def watch(frame: FrameType, event: str, _arg: object) -> None:  # observes; replaces nothing
        if event == "call" and frame.f_code is building:
            built_under_lock.append(any(s._holding for s in stores))

    def store(paths: Paths) -> HoldCounting:
        stores.append(HoldCounting(paths))
        return stores[-1]

    sys.setprofile(watch)
    try:
        done = run_main("bridge", "submit", first["id"], str(first["n"]), json.dumps(VERDICT), data_dir=data,
                        env=agent, hooks=Hooks(make_store=store))
    finally:
        sys.setprofile(None)
    assert done.envelope is not None and done.envelope["exit_code"] == 0, done.stderr
    assert built_under_lock == [False]
    assert [len(hold) for hold in stores[0].holds] == [1]  # the outcome, and the index saved with it


# ---- what a first call of a comment costs ---------------------------------------------------------


class Watched(FileStore):
    """The real store, noting which call-lock files exist when the first record is written."""

    def __init__(self, paths: Paths) -> None:
        super().__init__(paths)
        self.locks_at_first_write: list[str] | None = None

    def save_record(self, record: InboxRecord) -> None:
        if self.locks_at_first_write is None:
            calls = self.paths.call_lock_dir
            self.locks_at_first_write = sorted(p.stem for p in calls.iterdir()) if calls.exists() else []
        super().save_record(record)


def test_a_scan_makes_the_call_locks_it_may_take_before_its_first_durable_write(tmp_path: Path) -> None:
    """In a row, before the run's first durable write: the comments the limit lets it call, no
    other; a dry run makes none."""
    from _proc import run_main

    from watcher.pipeline import Hooks

    data = tmp_path / "data"
    export = write_export(tmp_path / "export.json", ["a1", "a2", "a3", "a4", "a5"])
    offline = {"WATCHER_PROVIDER": "offline"}
    assert run_main("cli", "scan", "--source", str(export), "--dry-run", data_dir=data, env=offline).returncode == 0
    assert not Paths(data).call_lock_dir.exists()
    stores: list[Watched] = []

    def store(paths: Paths) -> Watched:
        stores.append(Watched(paths))
        return stores[-1]

    done = run_main("cli", "scan", "--source", str(export), "--limit", "3", data_dir=data, env=offline,
                    hooks=Hooks(make_store=store))
    assert done.returncode == 0, done.stderr
    (watched,) = stores
    assert watched.locks_at_first_write == ["a1", "a2", "a3"]
    assert sorted(p.stem for p in Paths(data).call_lock_dir.iterdir()) == ["a1", "a2", "a3"]


class InboxReads(FileStore):
    """The real store, noting which comments' records it read from their files."""

    def __init__(self, paths: Paths) -> None:
        super().__init__(paths)
        self.inbox_reads: list[str] = []

    def _read(self, path: Path, *args: Any, **kwargs: Any) -> Any:
        if path.parent.name == "inbox":
            self.inbox_reads.append(path.stem)
        return super()._read(path, *args, **kwargs)


def test_a_record_this_run_wrote_as_it_is_is_not_read_back(tmp_path: Path) -> None:
    """A new comment is written, then re-read under the lock before its reservation: the file
    holds the record just written, so the re-read is an lstat. One whose text had to be mended to
    be written (a lone surrogate, stored as U+FFFD) is read back from its file."""
    from _proc import run_main

    from watcher.pipeline import Hooks

    doc = json.loads(write_export(tmp_path / "export.json", ["plain", "odd"]).read_text())
    doc["articles"][0]["comments"][1]["body_html"] = "<p>hello \udc00 there</p>"
    source = tmp_path / "surrogates.json"
    source.write_text(json.dumps(doc))
    stores: list[InboxReads] = []

    def store(paths: Paths) -> InboxReads:
        stores.append(InboxReads(paths))
        return stores[-1]

    done = run_main("cli", "scan", "--source", str(source), data_dir=tmp_path / "data",
                    env={"WATCHER_PROVIDER": "offline"}, hooks=Hooks(make_store=store))
    assert done.returncode == 0, done.stderr
    assert {cid for s in stores for cid in s.inbox_reads} == {"odd"}
