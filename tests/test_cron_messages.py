"""What cron's mail (its stdout) and the round's notification say about each comment (SPEC §15.3,
§16.1, §16.4): the start of the comment's own text, made safe; "edited" when its verdict is of a
text edited on dev.to; how many comments the round left for the next ones; and a comment with no
verdict, edited after its attempts were spent, named as such — never listed as needing a reply
under an "old verdict" it never had. Each round is ``watcher cron`` in this process against the
loopback Forem fake (tests/_mirror.py), and with WATCHER_NOTIFY a real receiver on loopback."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _fakes.forem import ForemSource
from _fakes.provider import in_process_hooks
from _mirror import AUTHOR, World, world
from _proc import Answer, run_main
from _receivers import HttpReceiver

from watcher.source import resolve_source

# A URL may run past the width, nothing else (SPEC §16.4).
_URL = re.compile(r"https?://\S+")


@pytest.fixture
def w(tmp_path: Path) -> Iterator[World]:
    with world(tmp_path) as account:
        yield account


@pytest.fixture
def http() -> Iterator[HttpReceiver]:
    receiver = HttpReceiver().start()
    yield receiver
    receiver.stop()


def cron(w: World, http: HttpReceiver | None = None, *args: str) -> Answer:
    """One round as ``World.watcher`` runs a command, its notification to ``http`` when given."""
    notify = {"WATCHER_NOTIFY": f"json://127.0.0.1:{http.port}/hook"} if http else {}
    source = ForemSource(w.clock)
    hooks = in_process_hooks(
        w.provider, make_source=lambda name: source if name == "devto" else resolve_source(name)
    )
    return run_main(
        "cli", "cron", *args, data_dir=w.data_dir, env={**w.env(), **notify}, hooks=hooks
    )


def messages(http: HttpReceiver) -> list[dict[str, Any]]:
    return [r.json() for r in http.got]


def _spend(w: World, cid: str, label: str) -> None:
    """All three attempts of ``cid`` (its text tagged ``label``) spent on non-verdicts."""
    w.provider.script(label, "malformed", "malformed", "malformed")
    w.json("scan")
    w.json("recheck")
    w.json("recheck")
    assert len(w.record(cid)["attempts"]) == 3 and w.record(cid).get("verdict") is None


def test_the_mail_and_the_message_start_with_the_comments_own_text(
    w: World, http: HttpReceiver
) -> None:
    """Each listed comment shows the start of its own text, on stdout and in the notification."""
    w.say("q1", "Does the cache survive a restart on Windows?")
    answer = cron(w, http)
    assert answer.returncode == 0, answer.stderr
    assert "“TAG:q1 Does the cache survive a restart on Windows?”" in answer.stdout
    (message,) = messages(http)
    assert "“TAG:q1 Does the cache survive a restart on Windows?”" in message["message"]


def test_a_long_comment_shows_its_first_200_characters(w: World, http: HttpReceiver) -> None:
    """The text is cut at 200 characters with an ellipsis, in both channels."""
    w.say("q1", "How? " + "a" * 300 + "ZZ-END")
    answer = cron(w, http)
    (message,) = messages(http)
    start = "TAG:q1 How? " + "a" * (200 - len("TAG:q1 How? "))
    assert start + "…" in message["message"] and "ZZ-END" not in message["message"]
    assert "ZZ-END" not in answer.stdout
    unwrapped = "".join(line.strip() for line in answer.stdout.splitlines())
    assert unwrapped.count("a" * 188 + "…") == 1


def test_hostile_text_is_shown_not_obeyed_in_both_channels(w: World, http: HttpReceiver) -> None:
    """ESC sequences and bidi overrides in the comment arrive as visible escapes; a newline in it
    starts no line of its own (a fake heading) in the mail or the message."""
    w.say(
        "q1",
        "How? \x1b[2J\x1b]8;;https://evil.example\x1b\\x\u202egnp.exe\n# Your account is locked",
    )
    answer = cron(w, http)
    (message,) = messages(http)
    for said in (answer.stdout, message["message"]):
        assert "\x1b" not in said and "\u202e" not in said
        assert "\\x1b[2J" in said and "\\u202e" in said
        assert not any(line.lstrip().startswith("# Your") for line in said.splitlines()), said


def test_every_line_of_the_mail_fits_80_columns_but_a_url(w: World) -> None:
    """Long words, a long article title and long texts, the start of each text included:
    stdout's lines are at most 80 wide, except a line holding a URL longer than the room."""
    w.article = w.forem.publish(AUTHOR, "Caching, pooling and the long road to a fast API " * 3)
    w.say("q1", "Does " + "supercalifragilistic " * 20 + "work? https://example.com/" + "p" * 90)
    w.say("q2", "x" * 250)
    answer = cron(w)
    assert answer.returncode == 0, answer.stderr
    assert "“TAG:q1 Does" in answer.stdout and "“TAG:q2" in answer.stdout  # the texts are there
    wide = [line for line in answer.stdout.splitlines() if len(line) > 80 and not _URL.search(line)]
    assert wide == [], wide


def test_a_comment_judged_again_after_an_edit_says_edited(w: World, http: HttpReceiver) -> None:
    """Listed, then edited on dev.to and judged again: the round that lists it again says
    "edited" beside it, on stdout and in the notification; the first listing does not."""
    q = w.say("q1")
    first = cron(w, http)
    w.forem.edit(q, "TAG:q2 Also: which version of Python?")
    again = cron(w, http)
    assert "edited" not in first.stdout and "edited" not in messages(http)[0]["message"]
    assert q in again.stdout and "edited on dev.to, judged again" in again.stdout, again.stdout
    assert "TAG:q2 Also" in again.stdout
    second = messages(http)[1]["message"]
    assert "edited on dev.to, judged again" in second and "TAG:q2 Also" in second


def test_comments_the_limit_left_are_counted_for_the_next_rounds(
    w: World, http: HttpReceiver
) -> None:
    """Three new comments, --limit 1: the one judged is listed, and "and 2 more waiting for the
    next rounds" follows it on stdout and in the notification; the round that judges the other
    two lists them and speaks of no more."""
    for label in ("q1", "q2", "q3"):
        w.say(label)
    answer = cron(w, http, "--limit", "1")
    assert answer.returncode == 0, answer.stderr
    assert "and 2 more waiting for the next rounds" in answer.stdout, answer.stdout
    (message,) = messages(http)
    assert "and 2 more waiting for the next rounds" in message["message"]
    rest = cron(w, http, "--limit", "5")  # judges both: nothing more to speak of
    assert rest.stdout.count("need a reply") == 1 and "more waiting" not in rest.stdout
    assert "more waiting" not in messages(http)[1]["message"]


def test_an_edit_after_the_attempts_were_spent_is_named_never_listed_as_needing_a_reply(
    w: World, http: HttpReceiver
) -> None:
    """No verdict, three attempts spent, then edited on dev.to: the round names it by id with
    `watcher grant` (a comment with no verdict, SPEC §15.3) and does not list it as needing a
    reply, nor speak of an old text's verdict — there never was one."""
    q = w.say("q1")
    _spend(w, q, "q1")
    w.forem.edit(q, "TAG:q2 Also: does it work offline?")
    answer = cron(w, http)
    assert answer.returncode == 0, answer.stderr
    said = " ".join(answer.stdout.split())  # as read: the wrapping undone
    assert f"watcher grant {q}" in said and "edited on dev.to since" in said, said
    assert "need a reply" not in answer.stdout and "old text" not in answer.stdout, answer.stdout
    (message,) = messages(http)
    assert "reply" not in message["title"], message["title"]
    assert f"watcher grant {q}" in message["message"] and "old text" not in message["message"]
    assert w.json("show", q)["result"]["state"] == "exhausted"
    assert w.provider.calls == ["q1", "q1", "q1"]


def test_an_edit_after_a_named_comments_attempts_is_not_listed_later(
    w: World, http: HttpReceiver
) -> None:
    """A comment named once for its spent attempts, then edited: a later round does not list it
    as needing a reply (nor send it as one); it stays named once."""
    q = w.say("q1")
    w.provider.script("q1", "malformed", "malformed", "malformed")
    named = [cron(w, http), cron(w, http)]
    assert sum(f"watcher grant {q}" in r.stdout for r in named) == 1
    sent = len(http.got)
    w.forem.edit(q, "TAG:q2 Also: does it work offline?")
    after = cron(w, http)
    assert (after.returncode, after.stdout, after.stderr) == (0, "", "")
    assert len(http.got) == sent
