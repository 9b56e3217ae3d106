"""A data dir for the draft tests (SPEC §16.5): comments, one of them answered by the author's
earlier replies on dev.to as a scan keeps them (each record's ``author_replies``, the index's
``last_reply_at``), written through the store as a scan would leave them."""

from __future__ import annotations

from pathlib import Path

from watcher.config import Paths
from watcher.models import Comment, InboxRecord, Prompt, Reply, SeenFile, Verdict
from watcher.providers.prompts import render
from watcher.store.files import FileStore

HINT = "Say which versions of Windows were tested."
VERDICT = Verdict(needs_reply=True, category="question", priority="normal",
                  summary="Asks about Windows.", reply_hint=HINT)
PARENT_TEXT = "I wrote a first version of this for Linux only. TAG:parent"


def voice(n: int) -> str:
    """The text of the author's n-th earlier reply (a larger n is a later one)."""
    return f"VOICE-{n}: cheers, glad it helped!"


def comment(cid: str, *, text: str | None = None, parent_id: str | None = None) -> Comment:
    return Comment(id=cid, article_id=1201, article_title="Caching on every OS",
                   article_url="https://dev.to/maya/caching", parent_id=parent_id, author=f"reader_{cid}",
                   created_at="2026-11-20T09:00:00Z", text=text or f"Does it work on Windows? TAG:{cid}",
                   url=f"https://dev.to/reader_{cid}/comment/{cid}")


def seed(data_dir: Path, *, earlier_replies: int = 7) -> FileStore:
    """``q1`` (a reply to ``p0``, with a verdict), ``p0``, and ``earlier_replies`` comments the
    author answered on dev.to, each with one reply of the author's (:func:`voice`)."""
    store = FileStore(Paths(data_dir))
    parent = comment("p0", text=PARENT_TEXT)
    store.save_record(InboxRecord(comment=parent, prompt=render(parent)))
    asked = comment("q1", parent_id="p0")
    store.save_record(InboxRecord(comment=asked, prompt=render(asked, parent_text=PARENT_TEXT),
                                  verdict=VERDICT))
    replied: dict[str, str] = {}
    for n in range(1, earlier_replies + 1):
        cid, at = f"a{n}", f"2026-11-{n:02d}T10:00:00Z"
        other = comment(cid)
        reply = Reply(id=f"r{n}", created_at=at, excerpt=voice(n))
        store.save_record(InboxRecord(comment=other, prompt=render(other), author_replies=[reply]))
        replied[cid] = at
    index, _ = store.reconcile_index(SeenFile())
    store.save_index(SeenFile(), index)
    store.note_author_replies(replied, replied)
    return store


def drafts_of(data_dir: Path, cid: str = "q1") -> list[dict[str, object]]:
    record = FileStore(Paths(data_dir)).load_record(cid)
    assert record is not None
    return [d.model_dump() for d in record.drafts]


def prompt_of(body: dict[str, object]) -> str:
    """The user message of an OpenAI-format request body."""
    messages = body["messages"]
    assert isinstance(messages, list)
    return str(messages[-1]["content"])


def a_prompt() -> Prompt:
    return render(comment("q1"))
