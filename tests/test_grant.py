"""`watcher grant` (SPEC §13.2): more attempts are the person's decision, recorded in the inbox file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _fakes.provider import FakeProvider, in_process_context
from _proc import write_export
from typer.testing import CliRunner

from watcher import commands, records
from watcher.cli import build_app
from watcher.commands import Context
from watcher.config import Paths
from watcher.store.files import FileStore

runner = CliRunner()


def _ctx(data_dir: Path, fake: FakeProvider, entrypoint: str = "cli") -> Context:
    return in_process_context(data_dir, fake, entrypoint=entrypoint)  # type: ignore[no-any-return]


@pytest.fixture
def exhausted(data_dir: Path, tmp_path: Path) -> FakeProvider:
    """Comment "ex1" answered malformed JSON three times: exhausted, 3 calls."""
    fake = FakeProvider()
    fake.script("ex1", "malformed")
    commands.scan(_ctx(data_dir, fake), source=str(write_export(tmp_path / "e.json", ["ex1"])))
    for _ in range(3):
        commands.recheck(_ctx(data_dir, fake))
    assert fake.calls == ["ex1"] * 3
    record = FileStore(Paths(data_dir)).load_record("ex1")
    assert record is not None and records.state_of(record) == "exhausted"
    return fake


def test_grant_gives_an_exhausted_comment_exactly_the_granted_attempts(data_dir: Path, exhausted: FakeProvider) -> None:
    """grant --attempts 1 → one more call, then exhausted again; the grant is on disk."""
    result = runner.invoke(build_app("cli"), ["grant", "ex1", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stdout
    doc = json.loads(result.stdout)["result"]
    assert (doc["granted"], doc["attempts"], doc["cap"], doc["state"]) == (1, 3, 4, "failed")
    record = FileStore(Paths(data_dir)).load_record("ex1")
    assert record is not None and [g.n for g in record.grants] == [1]
    for _ in range(3):
        commands.recheck(_ctx(data_dir, exhausted))
    assert exhausted.calls == ["ex1"] * 4  # exactly one more, however often recheck runs
    status = json.loads(runner.invoke(build_app("cli"), ["status", "--json"]).stdout)["result"]
    assert status["states"]["exhausted"] == 1


def test_bridge_refuses_grant_with_a_usage_envelope(data_dir: Path, exhausted: FakeProvider) -> None:
    """watcher-bridge grant: exit 2, one envelope, the inbox file unchanged (an agent never raises its budget)."""
    before = Paths(data_dir).inbox_file("ex1").read_bytes()
    result = runner.invoke(build_app("bridge"), ["grant", "ex1"], catch_exceptions=False)
    envelope = json.loads(result.stdout)
    assert result.exit_code == 2 and envelope["exit_code"] == 2 and envelope["error"]["kind"] == "usage"
    assert "person's decision" in envelope["error"]["message"]
    assert Paths(data_dir).inbox_file("ex1").read_bytes() == before


@pytest.mark.parametrize("attempts", ["0", "4", "abc"])
def test_grant_takes_1_to_3_attempts(data_dir: Path, exhausted: FakeProvider, attempts: str) -> None:
    """--attempts outside 1–3 is a usage error and grants nothing."""
    result = runner.invoke(build_app("cli"), ["grant", "ex1", "--attempts", attempts])
    assert result.exit_code == 2
    record = FileStore(Paths(data_dir)).load_record("ex1")
    assert record is not None and record.grants == []


def test_grant_refuses_a_comment_with_a_verdict_or_never_tried(data_dir: Path, tmp_path: Path) -> None:
    """A done comment needs nothing; a pending one has not had its first attempt."""
    fake = FakeProvider()
    commands.scan(_ctx(data_dir, fake), source=str(write_export(tmp_path / "e.json", ["ok1", "new1"])), limit=1)
    for cid, said in (("ok1", "already has a verdict"), ("new1", "not been tried yet"), ("nosuch", "no comment")):
        result = runner.invoke(build_app("cli"), ["grant", cid, "--json"])
        assert result.exit_code == 2 and said in json.loads(result.stdout)["error"]["message"], cid


def test_show_and_inbox_all_point_to_grant_for_an_exhausted_comment(data_dir: Path, exhausted: FakeProvider) -> None:
    """The person learns that `watcher grant` exists exactly where the exhausted comment shows up."""
    shown = runner.invoke(build_app("cli"), ["show", "ex1"]).stdout
    assert "watcher grant ex1" in shown
    rows = json.loads(runner.invoke(build_app("cli"), ["inbox", "--all", "--json"]).stdout)["result"]["comments"]
    assert "watcher grant ex1" in rows[0]["hint"]


def test_a_hand_edited_cap_buys_nothing(data_dir: Path, exhausted: FakeProvider) -> None:
    """The cap is 3 + grants: "cap": 50 written into the file does not reopen the comment."""
    path = Paths(data_dir).inbox_file("ex1")
    doc = json.loads(path.read_text())
    doc["cap"] = 50
    path.write_text(json.dumps(doc))
    commands.recheck(_ctx(data_dir, exhausted), ids=["ex1"])
    assert exhausted.calls == ["ex1"] * 3
