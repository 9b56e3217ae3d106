"""Tiny builders for inbox records and seen entries, shared by the foundation tests and their
subprocess workers (importable because pytest puts tests/ on sys.path, and the workers add it)."""

from __future__ import annotations

from watcher.config import Paths
from watcher.models import AttemptError, Comment, InboxRecord, Prompt, SeenComment, Verdict
from watcher.store.files import FileStore

T0 = "2026-05-14T09:00:00.000000Z"


def comment(cid: str = "abc1", *, article_id: int = 1201) -> Comment:
    return Comment(
        id=cid,
        article_id=article_id,
        article_title="An article",
        article_url="https://dev.to/me/an-article",
        author="priyan",
        created_at="2026-05-14T09:12:44Z",
        text="Does this work on Windows?",
        url=f"https://dev.to/priyan/comment/{cid}",
    )


def prompt() -> Prompt:
    return Prompt(template="verdict", template_sha256="0" * 64, system="You triage.", user="Comment: hi")


def record(cid: str = "abc1", *, article_id: int = 1201) -> InboxRecord:
    return InboxRecord(comment=comment(cid, article_id=article_id), prompt=prompt())


def verdict() -> Verdict:
    return Verdict(needs_reply=True, category="question", priority="normal", summary="Asks about Windows.",
                   reply_hint="")


def error(kind: str = "malformed_json") -> AttemptError:
    return AttemptError(kind=kind, message="model said nonsense")  # type: ignore[arg-type]


def entry(*, attempts: int = 0, status: str = "pending", triage: str = "open", article_id: int = 1201,
          stamp: str | None = None, updated_at: str = T0) -> SeenComment:
    return SeenComment(
        article_id=article_id,
        status=status,  # type: ignore[arg-type]
        attempts=attempts,
        triage=triage,  # type: ignore[arg-type]
        first_seen_at=T0,
        updated_at=updated_at,
        inbox_stamp=stamp,
    )


def emit(paths: Paths, key: str, *, run: str, entrypoint: str, comment: str | None = None) -> None:
    """One observation line through the store, as a run's :meth:`Batch.emit` appends it."""
    FileStore(paths).append_signals([{"key": key, "comment": comment, "run": run, "entrypoint": entrypoint}])
