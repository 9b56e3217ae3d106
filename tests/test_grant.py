"""`watcher grant` (SPEC §13.2): more attempts are the person's decision, recorded in the inbox file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks
from _proc import Answer, run_main, write_export

from watcher.state import records
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
    result = cli(data_dir, "grant", "ex1", "--yes", "--json")
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
    result = cli(data_dir, "grant", "ex1", "--yes", "--attempts", attempts)
    assert result.returncode == 2
    record = FileStore(Paths(data_dir)).load_record("ex1")
    assert record is not None and record.grants == []


def test_grant_refuses_a_comment_with_a_verdict_or_never_tried(data_dir: Path, tmp_path: Path) -> None:
    """A done comment needs nothing; a pending one has not had its first attempt."""
    fake = FakeProvider()
    cli(data_dir, "scan", "--source", str(write_export(tmp_path / "e.json", ["ok1", "new1"])), "--limit", "1",
        fake=fake)
    for cid, said in (("ok1", "already has a verdict"), ("new1", "not been tried yet"), ("nosuch", "no comment")):
        result = cli(data_dir, "grant", cid, "--yes", "--json")
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


# ---- grants stay the person's (SPEC §15.5) ---------------------------------------------------------


def _grant(data_dir: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = cli(data_dir, "grant", *args, "--json")
    assert result.envelope is not None, result.stdout
    return result.returncode, result.envelope


def test_without_a_terminal_grant_needs_yes(data_dir: Path, exhausted: FakeProvider) -> None:
    """An agent's shell or cron has no terminal: no --yes, nothing granted, and the message says why."""
    code, doc = _grant(data_dir, "ex1")
    assert code == 2 and doc["error"]["kind"] == "usage"
    assert "--yes" in doc["error"]["message"] and "terminal" in doc["error"]["message"]
    record = FileStore(Paths(data_dir)).load_record("ex1")
    assert record is not None and record.grants == []


def test_five_grants_of_three_stop_at_a_cap_of_nine(data_dir: Path, exhausted: FakeProvider) -> None:
    """The red team's 5 × 3 took the cap to 18: now 3 + 6 at most, and the refusal says what is left."""
    outcomes = [_grant(data_dir, "ex1", "--yes", "--attempts", "3") for _ in range(5)]
    assert [code for code, _ in outcomes] == [0, 0, 2, 2, 2]
    assert outcomes[1][1]["result"]["cap"] == 9
    assert "3 + 6" in outcomes[2][1]["error"]["message"]
    record = FileStore(Paths(data_dir)).load_record("ex1")
    assert record is not None and records.cap_of(record) == 9


def test_a_grant_past_the_cap_says_how_many_are_left(data_dir: Path, exhausted: FakeProvider) -> None:
    """4 granted: --attempts 3 is refused naming --attempts 2, which then goes through."""
    assert _grant(data_dir, "ex1", "--yes", "--attempts", "3")[0] == 0
    assert _grant(data_dir, "ex1", "--yes", "--attempts", "1")[0] == 0
    code, doc = _grant(data_dir, "ex1", "--yes", "--attempts", "3")
    assert code == 2 and "--attempts 2" in doc["error"]["message"]
    assert _grant(data_dir, "ex1", "--yes", "--attempts", "2")[1]["result"]["cap"] == 9


def _record_in(data_dir: Path, cid: str, **fields: object) -> None:
    from watcher.models import Comment
    from watcher.providers.prompts import render

    comment = Comment(id=cid, article_id=1, article_title="T", article_url="https://dev.to/a/t", author="r",
                      created_at="2025-01-02T09:00:00Z", text="an old question?", url=f"https://dev.to/r/comment/{cid}")
    record = records.new_record(comment, render(comment)).model_copy(update=fields)
    FileStore(Paths(data_dir)).save_record(record)


def test_a_baseline_or_answered_comment_is_refused_with_the_command_that_applies(data_dir: Path) -> None:
    """Neither has spent an attempt: baseline is queued with `scan --since`, an answered one reopened by mark."""
    _record_in(data_dir, "base1", baseline=True)
    _record_in(data_dir, "ans1", replied_at="2025-01-02T10:00:00Z")
    for cid, said in (("base1", "watcher scan --since"), ("ans1", "watcher mark ans1 open")):
        code, doc = _grant(data_dir, cid, "--yes")
        assert code == 2 and said in doc["error"]["message"], doc
        record = FileStore(Paths(data_dir)).load_record(cid)
        assert record is not None and record.grants == []


def _on_a_terminal(data_dir: Path, answer: str, *args: str) -> tuple[int, str, str]:
    """`watcher grant` as a real process whose stdin is a terminal (a pty), answering the question."""
    import os
    import subprocess

    from _proc import command, env_for

    main, other = os.openpty()
    try:
        proc = subprocess.Popen(command("cli", "grant", *args), stdin=other, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env_for(data_dir))
        os.write(main, answer.encode())
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(main)
        os.close(other)
    return proc.returncode, out, err


@pytest.mark.slow
def test_on_a_terminal_grant_asks_and_only_yes_grants(data_dir: Path, exhausted: FakeProvider) -> None:
    """A person at a terminal is asked (on stderr, so --json stays one document); "n" grants nothing."""
    code, out, err = _on_a_terminal(data_dir, "n\n", "ex1", "--json")
    assert code == 2 and "Give ex1 1 more attempt" in err and "nothing granted" in json.loads(out)["error"]["message"]
    record = FileStore(Paths(data_dir)).load_record("ex1")
    assert record is not None and record.grants == []
    code, out, err = _on_a_terminal(data_dir, "y\n", "ex1", "--json")
    assert code == 0, err
    assert json.loads(out)["result"]["cap"] == 4


def test_at_the_most_a_comment_gets_show_no_longer_points_to_grant(data_dir: Path, exhausted: FakeProvider) -> None:
    """Once 3 + 6 are spent, the hint says so instead of offering a grant that would be refused."""
    for _ in range(2):
        assert _grant(data_dir, "ex1", "--yes", "--attempts", "3")[0] == 0
    for _ in range(6):
        cli(data_dir, "recheck", fake=exhausted)
    assert exhausted.calls == ["ex1"] * 9
    shown = cli(data_dir, "show", "ex1").stdout
    assert "3 + 6 granted: the most a comment gets" in shown and "watcher grant ex1" not in shown
