"""SPEC §13.3, the pipeline's side: a first scan's backlog is baseline (never called until
`--since` queues it), and comments the author already answered on dev.to are never called."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks
from _proc import Answer, run_main

from watcher.state import records
from watcher.config import Paths, Settings
from watcher.models import SeenFile
from watcher.source import FetchResult, Source, read_export, resolve_source
from watcher.store.files import FileStore
from watcher.util.timeutil import iso, utcnow


@dataclass(frozen=True)
class Account:
    """dev.to as far as the pipeline can tell (the source named "devto"), served from an export
    file: the backlog rule is for an account's first scan, not for a deliberate import."""

    path: Path
    name: str = "devto"

    def fetch(self, settings: Settings, index: SeenFile, *, full: bool = False) -> FetchResult:
        return read_export(self.path, settings)


SourceFactory = Callable[[str], Source]


@pytest.fixture
def accounts(tmp_path: Path) -> SourceFactory:
    """The hooks' source factory: ``--source account-e`` (a, b) is an account served from
    tmp_path/e.json (a.json, b.json); any other --source is resolved as watcher does."""
    def source(name: str) -> Source:
        if name.startswith("account-"):
            return Account(tmp_path / f"{name.removeprefix('account-')}.json")
        return resolve_source(name)

    return source


def watcher(data_dir: Path, fake: FakeProvider, *args: str, sources: SourceFactory | None = None,
            **hooks: Any) -> Answer:
    """`watcher ARGS` in this process: its model calls go to ``fake``, its --source to ``sources``."""
    return run_main("cli", *args, data_dir=data_dir, env=IN_PROCESS_ENV,
                    hooks=in_process_hooks(fake, make_source=sources, **hooks))


def scan(data_dir: Path, fake: FakeProvider, source: str, *args: str, sources: SourceFactory | None = None,
         ) -> dict[str, Any]:
    """`watcher scan --source SOURCE ARGS --json`: its envelope."""
    done = watcher(data_dir, fake, "scan", "--source", source, *args, "--json", sources=sources)
    assert done.envelope is not None, done.stderr
    return done.envelope


def _export(path: Path, ages_days: dict[str, float], *, replies: dict[str, str] | None = None) -> Path:
    """One article; each comment ``TAG:<id>`` created ``ages_days`` ago; ``replies``: comment id ->
    the id of a direct reply by the author (maya_writes)."""
    now = utcnow()
    comments = []
    for cid, age in ages_days.items():
        children = []
        if replies and cid in replies:
            children.append({"type_of": "comment", "id_code": replies[cid], "created_at": iso(now - timedelta(hours=1)),
                             "body_html": "<p>Thanks, fixed!</p>", "user": {"name": "Maya", "username": "maya_writes"},
                             "children": []})
        comments.append({"type_of": "comment", "id_code": cid, "created_at": iso(now - timedelta(days=age)),
                         "body_html": f"<p>TAG:{cid} How do I configure this, and does it work on Windows?</p>",
                         "user": {"name": "Reader", "username": f"reader_{cid}"}, "children": children})
    doc = {"username": "maya_writes", "articles": [{"id": 7, "title": "Caching", "url": "https://dev.to/maya_writes/c",
                                                    "comments_count": len(comments), "comments": comments}]}
    path.write_text(json.dumps(doc))
    return path


def test_a_first_scan_records_the_backlog_as_baseline_and_calls_only_recent_comments(
        data_dir: Path, tmp_path: Path, accounts: SourceFactory) -> None:
    """Older than WATCHER_BACKLOG_DAYS (14) on the first scan: recorded, counted, listed, never called."""
    fake = FakeProvider()
    _export(tmp_path / "e.json", {"old1": 40, "old2": 20, "new1": 2})
    out = scan(data_dir, fake, "account-e", sources=accounts)
    assert out["error"] is None and fake.calls == ["new1"]
    assert out["result"]["baseline"] == 2 and out["result"]["discovered"] == 3
    paths = Paths(data_dir)
    assert {cid: records.state_of(FileStore(paths).load_record(cid)) for cid in ("old1", "old2", "new1")} == {  # type: ignore[arg-type]
        "old1": "baseline", "old2": "baseline", "new1": "done"}
    scan(data_dir, fake, "account-e", sources=accounts)
    watcher(data_dir, fake, "recheck")
    assert fake.calls == ["new1"]  # baseline is never called by a later scan or recheck
    status = json.loads(run_main("cli", "status", "--json", data_dir=data_dir).stdout)["result"]
    assert status["states"]["baseline"] == 2
    rows = json.loads(run_main("cli", "inbox", "--all", "--json", data_dir=data_dir).stdout)["result"]["comments"]
    assert {r["id"]: r["state"] for r in rows}["old1"] == "baseline"
    assert "--since" in {r["id"]: r["hint"] for r in rows}["old1"]


def test_scan_since_queues_the_baseline_created_since_that_date(
        data_dir: Path, tmp_path: Path, accounts: SourceFactory) -> None:
    """`scan --since DATE` queues baseline comments created on or after DATE, and only those."""
    fake = FakeProvider()
    _export(tmp_path / "e.json", {"old1": 40, "old2": 20, "new1": 2})
    scan(data_dir, fake, "account-e", sources=accounts)
    since = (utcnow() - timedelta(days=30)).date().isoformat()
    out = scan(data_dir, fake, "account-e", "--since", since, sources=accounts)
    assert out["error"] is None and fake.calls == ["new1", "old2"]
    record = FileStore(Paths(data_dir)).load_record("old1")
    assert record is not None and records.state_of(record) == "baseline"


def test_a_later_scan_checks_an_old_comment_it_had_not_seen(
        data_dir: Path, tmp_path: Path, accounts: SourceFactory) -> None:
    """The backlog window is for an account's first scan only: after that a comment discovered late
    (an old thread re-fetched) is checked like any other."""
    fake = FakeProvider()
    _export(tmp_path / "a.json", {"new1": 1})
    _export(tmp_path / "b.json", {"new1": 1, "late": 60})
    scan(data_dir, fake, "account-a", sources=accounts)
    scan(data_dir, fake, "account-b", sources=accounts)
    assert fake.calls == ["new1", "late"]


def test_an_export_file_is_a_deliberate_import_without_a_backlog_window(data_dir: Path, tmp_path: Path) -> None:
    """--source FILE checks every comment in it, however old (the backlog rule is for accounts)."""
    fake = FakeProvider()
    scan(data_dir, fake, str(_export(tmp_path / "x.json", {"old1": 90, "new1": 1})))
    assert fake.calls == ["old1", "new1"]


def test_since_is_checked(data_dir: Path) -> None:
    """--since must be a date."""
    result = run_main("cli", "scan", "--source", "x.json", "--since", "last week", data_dir=data_dir,
                      env={"WATCHER_PROVIDER": "offline"})
    assert result.returncode == 2 and "--since takes a date" in result.stderr


def test_a_persons_mark_wins_over_replies_before_it_and_a_later_reply_wins_over_the_mark(
        data_dir: Path, tmp_path: Path) -> None:
    """note_author_replies marks an open comment replied (by devto), but not one a person marked
    after the author's latest reply, `mark open` included; a reply after the mark closes it again
    (SPEC §15.2: the latest of the author's actions wins)."""
    fake = FakeProvider()
    scan(data_dir, fake, str(_export(tmp_path / "e.json", {"a1": 1, "a2": 1})))
    paths = Paths(data_dir)
    before = iso(utcnow() - timedelta(hours=1))
    FileStore(paths).patch_triage("a2", "open")  # the person reopened it on purpose
    marked = FileStore(paths).note_author_replies({"a1": before, "a2": before})
    index = FileStore(paths).load_index()
    assert marked == ["a1"]
    assert (index.comments["a1"].triage, index.comments["a1"].triage_by) == ("replied", "devto")
    assert (index.comments["a2"].triage, index.comments["a2"].triage_by) == ("open", "person")
    assert index.comments["a2"].replied_at is not None
    after = iso(utcnow() + timedelta(minutes=1))
    assert FileStore(paths).note_author_replies({"a2": before}, {"a2": after}) == ["a2"]
    index = FileStore(paths).load_index()
    assert (index.comments["a2"].triage, index.comments["a2"].triage_by) == ("replied", "devto")


def test_a_comment_the_author_already_answered_is_never_called(data_dir: Path, tmp_path: Path) -> None:
    """Discovered with a direct reply by the author: recorded as answered, 0 calls, marked replied
    (by devto); `show` says when you replied; `inbox` does not list it."""
    fake = FakeProvider()
    export = _export(tmp_path / "x.json", {"ans1": 1, "open1": 1}, replies={"ans1": "r9a"})
    out = scan(data_dir, fake, str(export))
    assert out["error"] is None and fake.calls == ["open1"] and out["result"]["answered"] == 1
    paths = Paths(data_dir)
    record = FileStore(paths).load_record("ans1")
    assert record is not None and records.state_of(record) == "answered" and record.attempts == []
    entry = FileStore(paths).load_index().comments["ans1"]
    assert (entry.triage, entry.triage_by) == ("replied", "devto")
    assert "you replied at" in run_main("cli", "show", "ans1", data_dir=data_dir).stdout
    listed = json.loads(run_main("cli", "inbox", "--json", data_dir=data_dir).stdout)["result"]["comments"]
    assert [r["id"] for r in listed] == ["open1"]


def test_a_reply_to_a_pending_comment_closes_it_before_its_first_call(data_dir: Path, tmp_path: Path) -> None:
    """Left pending by the limit, then answered on dev.to: the next scan turns it answered, no call."""
    fake = FakeProvider()
    scan(data_dir, fake, str(_export(tmp_path / "a.json", {"p1": 2, "p2": 1})), "--limit", "1")
    assert fake.calls == ["p1"]
    out = scan(data_dir, fake, str(_export(tmp_path / "b.json", {"p1": 2, "p2": 1}, replies={"p2": "r1"})))
    assert out["error"] is None and fake.calls == ["p1"]
    record = FileStore(Paths(data_dir)).load_record("p2")
    assert record is not None and records.state_of(record) == "answered"


def test_replying_after_the_verdict_empties_the_inbox_and_a_persons_open_stands(
        data_dir: Path, tmp_path: Path) -> None:
    """A comment with a verdict that the author then answers leaves `inbox`; `watcher mark ID open`
    afterwards brings it back for good (a later scan does not mark it replied again)."""
    fake = FakeProvider()
    scan(data_dir, fake, str(_export(tmp_path / "a.json", {"v1": 1})))
    assert "v1" in run_main("cli", "inbox", data_dir=data_dir).stdout
    replied = _export(tmp_path / "b.json", {"v1": 1}, replies={"v1": "r2"})
    out = scan(data_dir, fake, str(replied))
    assert out["result"]["replied"] == ["v1"] and fake.calls == ["v1"]
    assert "v1" not in run_main("cli", "inbox", data_dir=data_dir).stdout
    assert run_main("cli", "mark", "v1", "open", data_dir=data_dir).returncode == 0
    scan(data_dir, fake, str(replied))
    assert FileStore(Paths(data_dir)).load_index().comments["v1"].triage == "open"


def test_a_source_stopped_midway_processes_what_it_fetched_and_exits_3(data_dir: Path, tmp_path: Path) -> None:
    """dev.to answered 429 after some threads: their comments are checked, the run still exits 3."""
    from dataclasses import replace

    from watcher.errors import SourceUnavailable

    path = _export(tmp_path / "h.json", {"h1": 1})

    @dataclass(frozen=True)
    class Halfway:
        name: str = "devto"

        def fetch(self, settings: Settings, index: SeenFile, *, full: bool = False) -> FetchResult:
            got = read_export(path, settings)
            return replace(got, interrupted=SourceUnavailable("dev.to rate limit (HTTP 429); stopped after 1 of 2"))

    fake = FakeProvider()
    out = watcher(data_dir, fake, "scan", "--source", "halfway", "--json",
                  sources=lambda name: Halfway() if name == "halfway" else resolve_source(name))
    assert out.returncode == 3 and out.envelope is not None and "429" in out.envelope["error"]["message"]
    assert fake.calls == ["h1"]
