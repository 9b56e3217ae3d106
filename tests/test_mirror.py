"""SPEC §15.2: the inbox mirrors dev.to — edits judged again within the lifetime budget, deleted and
hidden comments gone from it, thread context, several marks at once and the latest of the author's
actions winning, and `watcher articles`. Whole scans in this process against the loopback Forem
fake and the provider fake (tests/_mirror.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _fakes.provider import running_fake
from _mirror import AUTHOR, World, world
from _proc import start

from watcher.state import records
from watcher.config import Paths
from watcher.store.files import FileStore


@pytest.fixture
def w(tmp_path: Path) -> Iterator[World]:
    with world(tmp_path) as account:
        yield account


def scan(w: World, *args: str) -> dict[str, Any]:
    out = w.json("scan", *args)
    assert out["exit_code"] == 0, out
    return out["result"]


# ---- edits -----------------------------------------------------------------------------------------


def test_an_edited_comment_is_judged_again_once_with_its_new_text_and_its_history_kept(w: World) -> None:
    """A question edited into "never mind" leaves the inbox, a "thanks" edited into a question joins
    it: one new call each, with the new prompt, within the same lifetime budget; the old text and
    verdict stay in `edits`."""
    q, t = w.say("q1"), w.say("t1", "Thanks!")
    w.provider.script("t1", "no-reply")
    w.provider.script("q2", "no-reply")
    scan(w)
    assert w.inbox() == {q}
    w.forem.edit(q, "TAG:q2 EDIT: never mind, I found it")
    w.forem.edit(t, "TAG:t2 Thanks! But how do I run it on Windows?")
    assert sorted(scan(w, "--dry-run")["would_call"]) == sorted([q, t])  # what the real run then calls
    result = scan(w)
    assert sorted(result["edited"]) == sorted([q, t])
    assert w.provider.calls == ["q1", "t1", "q2", "t2"]
    assert w.inbox() == {t}
    rec = w.record(q)
    assert "TAG:q2" in rec["prompt"]["user"] and "TAG:q1" not in rec["prompt"]["user"]
    assert [e["text"] for e in rec["edits"]] == ["TAG:q1 How do I configure this?"]
    assert rec["edits"][0]["verdict"]["needs_reply"] is True and rec["edits"][0]["attempts"] == 1
    assert rec["verdict"]["needs_reply"] is False and len(rec["attempts"]) == 2
    assert rec["attempts"][1]["text_sha256"] == rec["verdict_text_sha256"] == records.text_sha256(rec["comment"]["text"])
    assert rec["attempts"][0]["text_sha256"] == rec["edits"][0]["text_sha256"]
    scan(w)
    assert len(w.provider.calls) == 4  # seen once, judged once


def test_an_edit_judged_again_is_news_for_inbox_new_once_more(w: World) -> None:
    """`inbox --new` (the cron mail) listed a question; edited into another question and judged again,
    it is listed by `--new` once more — and once only."""
    q = w.say("q1")
    scan(w)
    new = lambda: [c["id"] for c in w.json("inbox", "--new")["result"]["comments"]]
    assert new() == [q] and new() == []
    w.forem.edit(q, "TAG:q2 Also: which version of Python?")
    scan(w)
    assert new() == [q] and new() == []


def test_an_edit_with_no_attempt_left_is_listed_edited_with_the_grant_hint_and_never_called(w: World) -> None:
    """Three attempts spent on the first text: the edit is listed `edited` with its old verdict and
    the `watcher grant` hint, with no call; a grant lets the next scan judge the new text."""
    q = w.say("q1")
    w.provider.script("q1", "malformed", "malformed", "verdict")
    scan(w)
    w.json("recheck")
    w.json("recheck")
    assert len(w.record(q)["attempts"]) == 3
    w.forem.edit(q, "TAG:q2 Also: does it work offline?")
    scan(w)
    assert w.provider.calls == ["q1", "q1", "q1"]
    listed = w.json("inbox")["result"]["comments"]
    assert [(c["id"], c["state"]) for c in listed] == [(q, "edited")]
    assert listed[0]["verdict"]["needs_reply"] is True and f"watcher grant {q}" in listed[0]["hint"]
    assert w.json("recheck")["result"]["calls"] == 0 and w.json("show", q)["result"]["state"] == "edited"
    assert w.watcher("grant", q, "--yes").returncode == 0
    scan(w)
    assert w.provider.calls == ["q1", "q1", "q1", "q2"] and len(w.record(q)["attempts"]) == 4


def test_an_edit_after_a_mark_or_a_reply_is_recorded_and_shown_never_called(w: World) -> None:
    """Marked ignored, or answered by the author on dev.to: the edit is in the file and in `show`,
    and no call is made for it."""
    a, b = w.say("a1"), w.say("b1")
    scan(w)
    assert w.watcher("mark", a, "ignored").returncode == 0
    w.reply(b)
    scan(w)
    w.forem.edit(a, "TAG:a2 and another question")
    w.forem.edit(b, "TAG:b2 and another question")
    assert sorted(scan(w)["edited"]) == sorted([a, b])
    assert w.provider.calls == ["a1", "b1"]
    for cid in (a, b):
        rec = w.record(cid)
        assert rec["comment"]["text"].startswith("TAG:") and rec["edits"][0]["judged"] is False
        assert rec["verdict"] is not None  # the verdict the person acted on stays
    shown = w.watcher("show", a).stdout
    assert "not judged again" in shown and "TAG:a1" in shown and "TAG:a2" in shown


def test_an_edit_while_its_attempt_is_in_flight_is_judged_by_the_next_scan(w: World) -> None:
    """A scan (a process of its own: the call in flight is the point) is out calling for the old
    text when the edit lands; a scan then leaves the edit (and the thread's change signal) alone,
    the outcome is saved for the old text, and the next scan judges the new text."""
    q = w.say("q1")
    with running_fake() as remote:
        remote.script("q1", "hold")
        env = {**remote.env(), "DEVTO_USERNAME": AUTHOR, "DEVTO_BASE_URL": w.base_url}
        outer = start("cli", "scan", "--json", data_dir=w.data_dir, env=env)
        remote.wait_in_flight()
        w.forem.edit(q, "TAG:q2 never mind")
        meanwhile = w.json("scan", entry="bridge")
        remote.release()
        _, err = outer.communicate(timeout=60)
    assert outer.returncode == 0, err
    assert meanwhile["exit_code"] == 0 and meanwhile["result"]["calls"] == 0 and not meanwhile["result"]["edited"]
    rec = w.record(q)
    assert "TAG:q1" in rec["comment"]["text"] and rec["verdict_text_sha256"] == records.text_sha256(rec["comment"]["text"])
    assert scan(w)["edited"] == [q]
    assert (remote.calls, w.provider.calls) == (["q1"], ["q2"])
    assert w.record(q)["edits"][0]["verdict"] is not None and len(w.record(q)["attempts"]) == 2


def test_scan_full_catches_an_edit_whose_change_signal_did_not_move(w: World) -> None:
    """Forem moves last_comment_at on edits; where it did not, `scan --full` still finds the edit."""
    q = w.say("q1")
    scan(w)
    w.forem.edit_quietly(q, "TAG:q2 changed")
    scan(w)
    assert w.provider.calls == ["q1"]
    scan(w, "--full")
    assert w.provider.calls == ["q1", "q2"]


# ---- deletions and hiding ----------------------------------------------------------------------------


def test_deleted_and_hidden_comments_leave_the_inbox_are_never_called_and_show_says_why(w: World) -> None:
    """Deleted without replies (gone from the thread), deleted with replies ([deleted]), hidden by the
    author: out of `inbox`, not retried (a failed one neither), explained by show, inbox --all and
    status; kept on disk."""
    lone, parent, hidden, failed = w.say("l1"), w.say("p1"), w.say("h1"), w.say("f1")
    child = w.say("c1", "Same question here", parent=parent)
    w.provider.script("f1", "malformed")
    scan(w)
    calls = list(w.provider.calls)
    assert w.inbox() == {lone, parent, hidden, child} and len(calls) == 5
    for cid in (lone, parent, failed):
        w.forem.delete(cid)
    w.forem.hide(hidden)
    result = scan(w)
    assert sorted(result["gone"]) == sorted([lone, parent, hidden, failed])
    assert w.inbox() == {child}
    assert w.json("recheck")["result"]["calls"] == 0 and w.json("recheck", failed)["result"]["calls"] == 0
    assert w.provider.calls == calls
    states = {c["id"]: c["state"] for c in w.json("inbox", "--all")["result"]["comments"]}
    assert (states[lone], states[parent], states[hidden], states[failed]) == ("deleted", "deleted", "hidden", "deleted")
    assert w.record(parent)["gone"]["why"].startswith("shown as [deleted]")
    assert w.record(lone)["gone"]["why"].startswith("missing from its thread")
    counts = w.json("status")["result"]["states"]
    assert (counts["deleted"], counts["hidden"]) == (3, 1)
    assert "hidden on dev.to" in w.watcher("show", hidden).stdout
    w.forem.hide(hidden, False)  # the author shows it again
    scan(w)
    assert hidden in w.inbox()


def test_a_comment_deleted_while_its_attempt_was_reserved_has_that_attempt_closed_never_called(w: World) -> None:
    """A run died with f1's second attempt reserved, then f1 was deleted on dev.to: the scan that sees
    the deletion records that attempt interrupted (SPEC §13.6) with no call, and then the comment is
    plainly deleted — not reserved for good, as when "deleted" hid the open attempt from every run."""
    failed = w.say("f1")
    w.provider.script("f1", "malformed")
    scan(w)
    store = FileStore(Paths(w.data_dir))
    record = store.load_record(failed)
    assert record is not None
    store.save_record(records.reserve(record, command="recheck", entrypoint="cli", provider="openai",
                                      model="fake-model", pid=5_999_999))
    w.forem.delete(failed)
    calls = list(w.provider.calls)
    result = scan(w)
    assert failed in result["gone"] and w.provider.calls == calls
    assert [(i["id"], i["outcome"]) for i in result["items"]] == [(failed, "interrupted")]
    rec = w.record(failed)
    assert [a["outcome"] for a in rec["attempts"]] == ["error", "error"] and rec["gone"]["kind"] == "deleted"
    assert rec["attempts"][-1]["error"]["kind"] == "interrupted"
    assert w.json("status")["result"]["states"]["deleted"] == 1
    assert w.json("recheck")["result"]["items"] == [] and w.provider.calls == calls


def test_a_partial_fetch_deletes_nothing(w: World) -> None:
    """A thread answered in pages (fewer comments than the listing counts) or a fetch stopped by an
    outage marks no known comment deleted."""
    first, second = w.say("a1"), w.say("b1")
    scan(w)
    w.forem.thread_page_cap = 1
    w.say("n1")  # the signal moves; the answer holds only the first root thread
    scan(w)
    assert w.inbox() == {first, second}
    w.forem.thread_page_cap = None
    w.forem.delete(second)
    w.forem.fail("/api/comments", 500)
    assert w.json("scan")["exit_code"] == 3
    assert second in w.inbox()
    scan(w)
    assert second not in w.inbox() and w.record(second)["gone"]["kind"] == "deleted"


# ---- context, marks, articles ----------------------------------------------------------------------


def test_show_prints_the_parent_and_your_replies_and_inbox_marks_answers_to_you(w: World) -> None:
    """A reply to the author's own comment is marked in `inbox`; `show` names its parent (author,
    first lines, id), and a comment's page shows the author's replies to it."""
    q = w.say("q1")
    mine = w.reply(q, "It is in settings.toml")
    follow = w.say("f1", "Which section of it?", parent=mine)
    scan(w)
    listed = {c["id"]: c for c in w.json("inbox")["result"]["comments"]}
    assert listed[follow]["answers_you"] is True and "answers your comment" in w.watcher("inbox").stdout
    shown = w.watcher("show", follow).stdout
    assert f"in reply to {mine} by you" in shown and "> It is in settings.toml" in shown
    assert f"your reply {mine}" in w.watcher("show", q).stdout
    parent = w.json("show", follow)["result"]["parent"]
    assert parent == {"id": mine, "author": "maya", "excerpt": "It is in settings.toml", "yours": True}


def test_mark_takes_several_ids_and_one_unknown_id_marks_nothing(w: World) -> None:
    """`mark a b c replied` marks all three; with an unknown id among them nothing is written."""
    ids = [w.say(f"m{i}") for i in range(3)]
    scan(w)
    seen = (w.data_dir / "seen.json").read_bytes()
    bad = w.watcher("mark", ids[0], "zzzz", "ignored")
    assert bad.returncode == 2 and "zzzz" in bad.stderr and (w.data_dir / "seen.json").read_bytes() == seen
    assert w.watcher("mark", *ids, "replied").returncode == 0
    assert w.inbox() == set()


def test_mark_open_after_an_author_reply_lists_it_until_a_later_reply(w: World) -> None:
    """The author answered on dev.to; `mark open` brings it back and later scans keep it; a reply
    made after that mark closes it again (the latest of the author's actions wins)."""
    q = w.say("q1")
    w.reply(q)
    scan(w)
    assert w.inbox() == set()
    assert w.watcher("mark", q, "open").returncode == 0
    assert w.inbox() == {q}
    w.say("x1")  # the thread moves; the old reply is still there
    scan(w)
    assert q in w.inbox()
    w.forem.now = records.parse_iso(records.iso()) + (w.forem.now - w.forem.now)  # dev.to's clock: now
    w.reply(q, "One more thing: see the docs")
    scan(w)
    assert q not in w.inbox()


def test_articles_counts_comments_waiting_and_activity(w: World) -> None:
    """Per article: comments (deleted ones not counted), how many need a reply, the oldest waiting,
    last activity; what waits longest first; the bridge and JSON agree."""
    a, b = w.say("a1"), w.say("b1", "Thanks!")
    w.provider.script("b1", "no-reply")
    other = w.forem.publish("maya", "Quiet post")
    w.forem.comment(other, "reader", "TAG:o1 nice", parent=None)
    w.provider.script("o1", "no-reply")
    w.forem.delete(b)
    scan(w)
    rows = {r["id"]: r for r in w.json("articles")["result"]["articles"]}
    busy, quiet = rows[w.article], rows[other]
    assert (busy["comments"], busy["need_reply"], quiet["need_reply"]) == (1, 1, 0)
    assert busy["oldest_waiting"] == w.record(a)["comment"]["created_at"] and busy["last_activity"]
    assert [r["id"] for r in w.json("articles")["result"]["articles"]] == [w.article, other]
    assert w.json("articles", entry="bridge")["result"] == w.json("articles")["result"]
