"""What a fetch hands to the pipeline: plain frozen records, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field

from watcher.errors import SourceUnavailable
from watcher.models import Comment, GoneKind, Reply


@dataclass(frozen=True)
class SourceArticle:
    """One of the author's articles as the source saw it in this fetch.

    ``comments_count`` and ``last_comment_at`` are its change signal (SPEC §13.3): Forem touches
    ``last_comment_at`` on every comment create, edit and delete, so it moves where the count does
    not (a new comment and a childless deletion cancel out). None where the Forem sends none.
    """

    id: int
    title: str
    url: str
    comments_count: int
    last_comment_at: str | None = None


@dataclass(frozen=True)
class Rejection:
    """An item of a payload that could not be used; the rest of the payload still went through.

    ``item`` is the comment id when it is a safe id, else a short description ("article 12,
    comment #3"); it is never a raw value that could be used as a path.
    """

    message: str
    item: str | None


@dataclass(frozen=True)
class FetchResult:
    articles: list[SourceArticle]
    # Articles whose comment list is now known to be current: fetched in this run, or known to
    # be empty because comments_count is 0 (no request needed for that). Only these may have
    # their change signal recorded; the others keep the old one, so a later scan fetches them.
    fetched_article_ids: set[int]
    # Flattened, filtered (no deleted/hidden/own), in thread order (parents before replies).
    comments: list[Comment]
    # id -> plain text of every usable comment, including skipped own/deleted ones, so a reply's
    # prompt can quote its parent.
    parent_texts: dict[str, str] = field(default_factory=dict)
    rejected: list[Rejection] = field(default_factory=list)
    # comment id -> created_at of the earliest direct reply by the article's author in the
    # fetched threads (the author answered it on dev.to). Own comments are skipped as comments,
    # but recorded here as replies.
    author_replies: dict[str, str] = field(default_factory=dict)
    # comment id -> created_at of the author's *latest* direct reply: a reply after the person's
    # `mark open` closes the comment again (SPEC §15.2).
    latest_replies: dict[str, str] = field(default_factory=dict)
    # comment id -> the author's direct replies (for `show`).
    reply_nodes: dict[str, list[Reply]] = field(default_factory=dict)
    # Deletions (SPEC §15.2). ``thread_ids``: every comment id each fetched thread held, markers
    # included. ``whole``: the fetched threads that held as many comments as the listing counts —
    # only in those is a known comment that is missing deleted (a partial or paged answer deletes
    # nothing). ``gone``: comments the threads showed as deleted or hidden (kind, why).
    thread_ids: dict[int, set[str]] = field(default_factory=dict)
    whole: set[int] = field(default_factory=set)
    gone: dict[str, tuple[GoneKind, str]] = field(default_factory=dict)
    # The error that stopped the fetch midway (a 429 past the wait budget, an outage, an edge
    # 403), or None. What was fetched before it is in the fields above as usual.
    interrupted: SourceUnavailable | None = None
