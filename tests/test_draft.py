"""SPEC §16.5: `watcher draft ID` — a reply draft through the configured provider, under a budget
of 3 drafts per comment of its own, kept in the inbox file, on the clipboard with --copy."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _draft_data import HINT, PARENT_TEXT, drafts_of, prompt_of, seed, voice
from _fakes.provider import (
    DRAFT,
    IN_PROCESS_ENV,
    FakeProvider,
    in_process_hooks,
    key_leaks,
    running_fake,
)
from _proc import run_main

from watcher.config import Paths
from watcher.models import Attempt, Grant, InboxRecord
from watcher.store.files import FileStore

OFFLINE = {"WATCHER_PROVIDER": "offline"}


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as server:
        yield server


def test_the_authors_earlier_replies_reach_the_prompt_and_the_key_no_file(
    data_dir: Path, fake: FakeProvider
) -> None:
    """Over the loopback provider: the prompt holds the title, the parent and the 5 newest of the
    author's earlier replies; a key the model echoes is in no file of the data dir."""
    seed(data_dir, earlier_replies=7)
    fake.label_last = True  # the prompt quotes the parent first
    fake.script("q1", "echo-key-summary")
    proc = run_main("cli", "draft", "q1", "--json", data_dir=data_dir, env=fake.env())
    assert proc.returncode == 0, proc.stderr
    (body,) = fake.bodies
    user = prompt_of(body)
    assert "response_format" not in body and body["max_completion_tokens"] <= 1024
    assert "Caching on every OS" in user and PARENT_TEXT in user
    assert [n for n in range(1, 8) if voice(n) in user] == [3, 4, 5, 6, 7]
    key = fake.env()["WATCHER_API_KEY"]
    text = json.loads(proc.stdout)["result"]["text"]
    assert "[redacted]" in text and not key_leaks(text, key)
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    assert files and not [p for p in files if key_leaks(p.read_text("utf-8", "replace"), key)]


def test_three_drafts_then_the_fourth_is_refused_with_exit_2(data_dir: Path) -> None:
    """A comment has 3 drafts in its lifetime: the 4th is refused, naming the newest, and writes
    nothing."""
    seed(data_dir)
    codes = [
        run_main("cli", "draft", "q1", data_dir=data_dir, env=OFFLINE).returncode for _ in range(3)
    ]
    before = (Paths(data_dir).inbox_file("q1")).read_bytes()
    fourth = run_main("cli", "draft", "q1", data_dir=data_dir, env=OFFLINE)
    assert codes == [0, 0, 0]
    assert fourth.returncode == 2
    assert "all its 3 drafts" in fourth.stderr and "draft 3" in fourth.stderr
    assert Paths(data_dir).inbox_file("q1").read_bytes() == before


def test_drafts_never_touch_the_verdicts_attempts(data_dir: Path) -> None:
    """A comment whose 3 attempts are spent still gets its drafts, and its attempts, grants and
    verdict stay exactly as they were."""
    store = seed(data_dir)
    record = store.load_record("q1")
    assert record is not None
    spent = [
        Attempt(
            n=n,
            reserved_at="2026-11-20T10:00:00Z",
            command="scan",
            entrypoint="cli",
            pid=1,
            provider="openai",
            model="m",
            outcome="error",
            finished_at="2026-11-20T10:00:01Z",
        )
        for n in (1, 2, 3)
    ]
    store.save_record(
        record.model_copy(
            update={"attempts": spent, "grants": [Grant(at="2026-11-21T00:00:00Z", n=1)]}
        )
    )
    before = store.load_record("q1")
    assert before is not None
    proc = run_main("cli", "draft", "q1", data_dir=data_dir, env=OFFLINE)
    after = FileStore(Paths(data_dir)).load_record("q1")
    assert proc.returncode == 0, proc.stderr
    assert after is not None and len(after.drafts) == 1
    assert (after.attempts, after.grants, after.verdict) == (
        before.attempts,
        before.grants,
        before.verdict,
    )


def test_the_offline_draft_is_a_template_from_the_reply_hint_labelled_offline(
    data_dir: Path,
) -> None:
    """The offline provider calls no model: its draft is the verdict's reply hint in a template
    with […] to fill in, and says so."""
    seed(data_dir)
    doc = json.loads(
        run_main("cli", "draft", "q1", "--json", data_dir=data_dir, env=OFFLINE).stdout
    )
    human = run_main("cli", "draft", "q1", data_dir=data_dir, env=OFFLINE)
    result = doc["result"]
    assert (result["offline"], result["provider"]) == (True, "offline")
    assert HINT in result["text"] and "[…" in result["text"]
    said = " ".join(human.stderr.split())
    assert "offline template" in said and "no model wrote it" in said
    assert human.stdout.strip() == result["text"].strip()


def test_copy_without_a_clipboard_says_so_exits_2_and_still_prints_the_draft(
    data_dir: Path, tmp_path: Path
) -> None:
    """--copy where no clipboard command is on PATH: a clear message, exit 2, the draft printed and
    kept."""
    seed(data_dir)
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = run_main(
        "cli", "draft", "q1", "--copy", data_dir=data_dir, env={**OFFLINE, "PATH": str(empty)}
    )
    assert proc.returncode == 2
    assert "no clipboard command found" in proc.stderr and "xclip" in proc.stderr
    assert HINT in proc.stdout
    assert len(drafts_of(data_dir)) == 1


def test_copy_puts_the_draft_on_the_clipboard(data_dir: Path, tmp_path: Path) -> None:
    """--copy hands the draft to the clipboard command on PATH (here a script standing in for
    xclip, a real process), exactly as printed."""
    seed(data_dir)
    bin_dir, clipboard = tmp_path / "bin", tmp_path / "clipboard.txt"
    bin_dir.mkdir()
    xclip = bin_dir / "xclip"
    xclip.write_text(
        f'#!/bin/sh\n[ "$1 $2" = "-selection clipboard" ] || exit 9\n/bin/cat > "{clipboard}"\n'
    )
    xclip.chmod(0o755)
    proc = run_main(
        "cli",
        "draft",
        "q1",
        "--copy",
        "--json",
        data_dir=data_dir,
        env={**OFFLINE, "PATH": str(bin_dir)},
    )
    result = json.loads(proc.stdout)["result"]
    assert proc.returncode == 0, proc.stderr
    assert result["copied"] is True
    assert clipboard.read_text("utf-8") == result["text"]


def test_a_failed_draft_call_is_counted_and_exits_3_with_its_envelope(data_dir: Path) -> None:
    """A draft whose call fails (a 500) is kept with its error and counted; the envelope says
    so, exit 3, and the next draft may be tried."""
    seed(data_dir)
    fake = FakeProvider()
    fake.label_last = True  # the prompt quotes the parent first
    fake.script("q1", "500", "verdict")
    hooks = in_process_hooks(fake)
    failed = run_main(
        "cli", "draft", "q1", "--json", data_dir=data_dir, env=IN_PROCESS_ENV, hooks=hooks
    )
    doc = json.loads(failed.stdout)
    again = run_main(
        "cli", "draft", "q1", "--json", data_dir=data_dir, env=IN_PROCESS_ENV, hooks=hooks
    )
    assert (failed.returncode, doc["ok"], doc["exit_code"]) == (3, False, 3)
    assert doc["result"]["error"]["kind"] == "server_error" and doc["result"]["drafts_left"] == 2
    assert "2 of 3 drafts left" in doc["error"]["message"]
    assert again.returncode == 0 and json.loads(again.stdout)["result"]["text"] == DRAFT
    assert [d["outcome"] for d in drafts_of(data_dir)] == ["error", "ok"]


def test_a_429_sets_the_cooldown_and_the_next_draft_waits_without_a_call(data_dir: Path) -> None:
    """A draft call is a provider call: its 429 writes the cooldown, and the next draft is refused
    (exit 3) without a call and without spending a draft."""
    seed(data_dir)
    fake = FakeProvider()
    fake.label_last = True  # the prompt quotes the parent first
    fake.script("q1", "429:600")
    hooks = in_process_hooks(fake)
    first = run_main("cli", "draft", "q1", data_dir=data_dir, env=IN_PROCESS_ENV, hooks=hooks)
    second = run_main("cli", "draft", "q1", data_dir=data_dir, env=IN_PROCESS_ENV, hooks=hooks)
    assert (first.returncode, second.returncode) == (3, 3)
    assert "cooldown" in second.stderr
    assert len(fake.calls) == 1 and len(drafts_of(data_dir)) == 1
    assert FileStore(Paths(data_dir)).load_provider_state().cooldown_until is not None


def test_an_orphaned_draft_is_closed_as_interrupted_and_still_counts(data_dir: Path) -> None:
    """A draft reserved by a process that died (nobody holds its call lock, and its pid is gone)
    is closed as interrupted by the next draft, which is then draft 2."""
    store = seed(data_dir)
    record = store.load_record("q1")
    assert record is not None
    from watcher.state import drafts

    reserved = drafts.reserve_draft(record, entrypoint="cli", provider="offline", model="m")
    store.save_record(_by(reserved, _dead_pid()))
    proc = run_main("cli", "draft", "q1", "--json", data_dir=data_dir, env=OFFLINE)
    result = json.loads(proc.stdout)["result"]
    kept = drafts_of(data_dir)
    assert proc.returncode == 0, proc.stderr
    assert (result["n"], result["drafts_left"], result["interrupted"]) == (2, 1, 1)
    assert kept[0]["outcome"] == "error" and kept[0]["error"]["kind"] == "interrupted"


def test_a_draft_whose_call_is_in_flight_elsewhere_is_left_alone(data_dir: Path) -> None:
    """An open draft whose call lock another run holds is in flight, not an orphan: the draft
    command exits 4 and writes nothing."""
    store = seed(data_dir)
    record = store.load_record("q1")
    assert record is not None
    from watcher.state import drafts

    store.save_record(drafts.reserve_draft(record, entrypoint="cli", provider="offline", model="m"))
    held = FileStore(Paths(data_dir)).call_lock("q1")
    assert held is not None
    before = Paths(data_dir).inbox_file("q1").read_bytes()
    try:
        proc = run_main("cli", "draft", "q1", data_dir=data_dir, env=OFFLINE)
    finally:
        held.release()
    assert proc.returncode == 4
    assert "in flight" in proc.stderr
    assert Paths(data_dir).inbox_file("q1").read_bytes() == before


def test_show_prints_the_newest_draft(data_dir: Path) -> None:
    """`show` prints the newest draft with a text, labelled; its JSON carries it as `draft`."""
    seed(data_dir)
    run_main("cli", "draft", "q1", data_dir=data_dir, env=OFFLINE)
    run_main("cli", "draft", "q1", data_dir=data_dir, env=OFFLINE)
    human = run_main("cli", "show", "q1", data_dir=data_dir, env=OFFLINE)
    doc = json.loads(run_main("cli", "show", "q1", "--json", data_dir=data_dir, env=OFFLINE).stdout)
    assert "reply draft 2 (an offline template" in human.stdout and HINT in human.stdout
    assert doc["result"]["draft"]["n"] == 2


def test_a_record_without_drafts_shows_none_and_keeps_its_shape(data_dir: Path) -> None:
    """An inbox file without `drafts` reads as no drafts and is written back without the key."""
    seed(data_dir)
    doc = json.loads(run_main("cli", "show", "q1", "--json", data_dir=data_dir, env=OFFLINE).stdout)
    assert "draft" not in doc["result"]
    assert "drafts" not in json.loads(Paths(data_dir).inbox_file("q1").read_text())


def test_provider_agent_writes_no_draft(data_dir: Path) -> None:
    """With provider agent watcher calls no model: draft is refused (exit 2), naming reply-session."""
    seed(data_dir)
    proc = run_main("cli", "draft", "q1", data_dir=data_dir, env={"WATCHER_PROVIDER": "agent"})
    assert proc.returncode == 2 and "reply-session" in proc.stderr
    assert drafts_of(data_dir) == []


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def _by(record: InboxRecord, pid: int) -> InboxRecord:
    """``record`` with its last draft reserved by ``pid``."""
    last = record.drafts[-1].model_copy(update={"pid": pid})
    return record.model_copy(update={"drafts": [*record.drafts[:-1], last]})


def test_a_draft_whose_call_lock_was_removed_while_its_process_runs_is_left_alone(
    data_dir: Path,
) -> None:
    """An open draft of a process that still runs, its call-lock file removed or replaced (so
    the free lock is not the one it was reserved under), is in flight: exit 4, nothing written,
    no second draft call beside it (watcher/pipeline/in_flight.py)."""
    store = seed(data_dir)
    record = store.load_record("q1")
    assert record is not None
    from watcher.state import drafts

    store.save_record(drafts.reserve_draft(record, entrypoint="cli", provider="offline", model="m"))
    before = Paths(data_dir).inbox_file("q1").read_bytes()
    proc = run_main("cli", "draft", "q1", data_dir=data_dir, env=OFFLINE)
    assert proc.returncode == 4, proc.stderr
    assert "removed or replaced" in " ".join(proc.stderr.split())
    assert Paths(data_dir).inbox_file("q1").read_bytes() == before
