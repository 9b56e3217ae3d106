"""`watcher grant` (SPEC §13.2): more attempts are the person's decision, recorded in the inbox file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks
from _proc import Answer, run_main, write_export

from watcher import records
from watcher.config import Paths
from watcher.store.files import FileStore


def cli(data_dir: Path, *args: str, fake: FakeProvider | None = None, entry: str = "cli") -> Answer:
    """`watcher ARGS` in this process; with ``fake``, its model calls go to ``fake`` in process."""
    if fake is None:
        return run_main(entry, *args, data_dir=data_dir)
    return run_main(entry, *args, data_dir=data_dir, env=IN_PROCESS_ENV, hooks=in_process_hooks(fake))


@pytest.fixture
def exhausted(data_dir: Path, tmp_path: Path) -> FakeProvider:
    """Comment "ex1" answered malformed JSON three times: exhausted, 3 calls."""
    fake = FakeProvider()
    fake.script("ex1", "malformed")
    cli(data_dir, "scan", "--source", str(write_export(tmp_path / "e.json", ["ex1"])), fake=fake)
    for _ in range(3):
        cli(data_dir, "recheck", fake=fake)
    assert fake.calls == ["ex1"] * 3
    record = FileStore(Paths(data_dir)).load_record("ex1")
    assert record is not None and records.state_of(record) == "exhausted"
    return fake


def test_grant_gives_an_exhausted_comment_exactly_the_granted_attempts(data_dir: Path, exhausted: FakeProvider) -> None:
    """grant --attempts 1 → one more call, then exhausted again; the grant is on disk."""
    result = cli(data_dir, "grant", "ex1", "--json")
    assert result.returncode == 0, result.stdout
    doc = json.loads(result.stdout)["result"]
    assert (doc["granted"], doc["attempts"], doc["cap"], doc["state"]) == (1, 3, 4, "failed")
    record = FileStore(Paths(data_dir)).load_record("ex1")
    assert record is not None and [g.n for g in record.grants] == [1]
    for _ in range(3):
        cli(data_dir, "recheck", fake=exhausted)
    assert exhausted.calls == ["ex1"] * 4  # exactly one more, however often recheck runs
    status = json.loads(cli(data_dir, "status", "--json").stdout)["result"]
    assert status["states"]["exhausted"] == 1


def test_bridge_refuses_grant_with_a_usage_envelope(data_dir: Path, exhausted: FakeProvider) -> None:
    """watcher-bridge grant: exit 2, one envelope, the inbox file unchanged (an agent never raises its budget)."""
    before = Paths(data_dir).inbox_file("ex1").read_bytes()
    result = cli(data_dir, "grant", "ex1", entry="bridge")
    envelope = json.loads(result.stdout)
    assert result.returncode == 2 and envelope["exit_code"] == 2 and envelope["error"]["kind"] == "usage"
    assert "person's decision" in envelope["error"]["message"]
    assert Paths(data_dir).inbox_file("ex1").read_bytes() == before


@pytest.mark.parametrize("attempts", ["0", "4", "abc"])
def test_grant_takes_1_to_3_attempts(data_dir: Path, exhausted: FakeProvider, attempts: str) -> None:
    """--attempts outside 1–3 is a usage error and grants nothing."""
    result = cli(data_dir, "grant", "ex1", "--attempts", attempts)
    assert result.returncode == 2
    record = FileStore(Paths(data_dir)).load_record("ex1")
    assert record is not None and record.grants == []


def test_grant_refuses_a_comment_with_a_verdict_or_never_tried(data_dir: Path, tmp_path: Path) -> None:
    """A done comment needs nothing; a pending one has not had its first attempt."""
    fake = FakeProvider()
    cli(data_dir, "scan", "--source", str(write_export(tmp_path / "e.json", ["ok1", "new1"])), "--limit", "1",
        fake=fake)
    for cid, said in (("ok1", "already has a verdict"), ("new1", "not been tried yet"), ("nosuch", "no comment")):
        result = cli(data_dir, "grant", cid, "--json")
        assert result.returncode == 2 and said in json.loads(result.stdout)["error"]["message"], cid


def test_show_and_inbox_all_point_to_grant_for_an_exhausted_comment(data_dir: Path, exhausted: FakeProvider) -> None:
    """The person learns that `watcher grant` exists exactly where the exhausted comment shows up."""
    shown = cli(data_dir, "show", "ex1").stdout
    assert "watcher grant ex1" in shown
    rows = json.loads(cli(data_dir, "inbox", "--all", "--json").stdout)["result"]["comments"]
    assert "watcher grant ex1" in rows[0]["hint"]


def test_a_hand_edited_cap_buys_nothing(data_dir: Path, exhausted: FakeProvider) -> None:
    """The cap is 3 + grants: "cap": 50 written into the file does not reopen the comment."""
    path = Paths(data_dir).inbox_file("ex1")
    doc = json.loads(path.read_text())
    doc["cap"] = 50
    path.write_text(json.dumps(doc))
    cli(data_dir, "recheck", "ex1", fake=exhausted)
    assert exhausted.calls == ["ex1"] * 3
