"""What cron's mail (its stdout) and the round's notification say about each comment (SPEC §15.3,
§16.1): a comment with no verdict, edited after its attempts were spent, named as such — never
listed as needing a reply under an "old verdict" it never had. Each round is ``watcher cron``
in this process against the loopback Forem fake (tests/_mirror.py), and with WATCHER_NOTIFY a
real receiver on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _fakes.forem import ForemSource
from _fakes.provider import in_process_hooks
from _mirror import World, world
from _proc import Answer, run_main
from _receivers import HttpReceiver

from watcher.source import resolve_source


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
