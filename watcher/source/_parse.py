"""Forem payloads to watcher records: pure functions over decoded JSON, no I/O (SPEC §5).

Every payload item is checked on its own: a bad one becomes a :class:`Rejection` naming it, and
the good items beside it still go through. Comment ids become file names under ``inbox/``, so an
``id_code`` outside ``^[a-z0-9]{1,16}$`` (say ``../../etc``) is rejected here, before anything
downstream could join it to a path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeGuard
from urllib.parse import quote, urlsplit

from pydantic import ValidationError

from watcher.errors import SourceUnavailable
from watcher.models import COMMENT_ID_RE, COMMENT_ID_SHAPE, Comment, GoneKind, Reply
from watcher.source._html import html_to_text
from watcher.source._types import FetchResult, Rejection, SourceArticle
from watcher.util.timeutil import parse_iso
from watcher.util.urls import split_credentials

# What Forem's v1 comment view (app/views/api/v1/comments/_comment.json.jbuilder) sends for a
# comment deleted with replies under it (a childless one is destroyed: it is simply gone) and one
# hidden by the article's author: this body and ``user: {}``, the replies still beneath.
DELETED_BODY, HIDDEN_BODY = "[deleted]", "[hidden by post author]"
SKIPPED_BODIES = frozenset({DELETED_BODY, HIDDEN_BODY})
GONE_BY_BODY: dict[str, tuple[GoneKind, str]] = {
    DELETED_BODY: ("deleted", "shown as [deleted] in its thread on dev.to"),
    HIDDEN_BODY: ("hidden", "hidden by the article's author on dev.to"),
}
EXCERPT_LINES, EXCERPT_CHARS = 3, 240  # the first lines of a parent or reply kept for `show`


def excerpt(text: str) -> str:
    """The first lines of ``text``, at most :data:`EXCERPT_CHARS` characters."""
    lines = [line for line in text.splitlines() if line.strip()][:EXCERPT_LINES]
    short = "\n".join(lines)
    return short if len(short) <= EXCERPT_CHARS else short[: EXCERPT_CHARS - 1] + "…"


_SHOW = 40  # characters of a bad value quoted in a message


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOW else text[: _SHOW - 3] + "..."


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_article(raw: Any, *, where: str) -> tuple[SourceArticle, str | None] | Rejection:
    """One article of a listing or export, with its author's username when the payload has it."""
    if not isinstance(raw, dict):
        return Rejection(f"{where} is not a JSON object ({type(raw).__name__}); skipped", where)
    if _is_int(raw.get("id")) and raw["id"] > 0:
        where = f"article {raw['id']}"
    problems = []
    if not (_is_int(raw.get("id")) and raw["id"] > 0):
        problems.append(f"id must be a positive integer, got {_show(raw.get('id'))}")
    for key in ("title", "url"):
        if not isinstance(raw.get(key), str):
            problems.append(f"{key} must be a string, got {_show(raw.get(key))}")
    count = raw.get("comments_count")
    if not (_is_int(count) and count >= 0):
        problems.append(f"comments_count must be a non-negative integer, got {_show(count)}")
    if problems:
        return Rejection(f"{where}: {'; '.join(problems)}; skipped", where)
    user = raw.get("user")
    author = user.get("username") if isinstance(user, dict) else None
    # Read back from the payload (Any) rather than from `count` (Any | None): each was checked
    # above.
    article = SourceArticle(
        id=raw["id"],
        title=raw["title"],
        url=raw["url"],
        comments_count=raw["comments_count"],
        last_comment_at=_timestamp_or_none(raw.get("last_comment_at")),
    )
    return article, author if isinstance(author, str) and author else None


def _timestamp_or_none(value: Any) -> str | None:
    """A usable ``last_comment_at``, else None: an article without one (another Forem, a bad value)
    falls back to ``comments_count`` as its change signal instead of being rejected."""
    return value if isinstance(value, str) and _created_at_problem(value) is None else None


@dataclass
class Collector:
    """Accumulates one fetch's comments; ``result()`` freezes it into a :class:`FetchResult`."""

    include_own: bool
    # Where comment permalinks point (``https://dev.to``); None: the host of each article's url.
    site: str | None = None
    articles: list[SourceArticle] = field(default_factory=list)
    fetched: set[int] = field(default_factory=set)
    comments: list[Comment] = field(default_factory=list)
    parent_texts: dict[str, str] = field(default_factory=dict)
    rejected: list[Rejection] = field(default_factory=list)
    author_replies: dict[str, str] = field(default_factory=dict)
    latest_replies: dict[str, str] = field(default_factory=dict)
    reply_nodes: dict[str, list[Reply]] = field(default_factory=dict)
    thread_ids: dict[int, set[str]] = field(default_factory=dict)
    node_counts: dict[int, int] = field(default_factory=dict)
    gone: dict[str, tuple[GoneKind, str]] = field(default_factory=dict)
    interrupted: SourceUnavailable | None = None
    _ids: set[str] = field(default_factory=set)
    _authors: dict[str, str] = field(default_factory=dict)

    def result(self) -> FetchResult:
        return FetchResult(
            articles=list(self.articles),
            fetched_article_ids=set(self.fetched),
            comments=list(self.comments),
            parent_texts=dict(self.parent_texts),
            rejected=list(self.rejected),
            author_replies=dict(self.author_replies),
            latest_replies=dict(self.latest_replies),
            reply_nodes={cid: list(nodes) for cid, nodes in self.reply_nodes.items()},
            thread_ids={aid: set(ids) for aid, ids in self.thread_ids.items()},
            whole={
                a.id
                for a in self.articles
                if a.id in self.fetched and self.node_counts.get(a.id, 0) >= a.comments_count
            },
            gone=dict(self.gone),
            interrupted=self.interrupted,
        )

    def add_thread(self, nodes: Any, *, article: SourceArticle, author: str | None) -> bool:
        """Flatten one article's nested comment list; False (and a rejection) if it is no list."""
        if not isinstance(nodes, list):
            where = f"article {article.id}"
            self.rejected.append(
                Rejection(
                    f"{where}: comments must be a JSON list, got {type(nodes).__name__}; skipped",
                    where,
                )
            )
            return False
        self.thread_ids.setdefault(article.id, set())
        self.node_counts.setdefault(article.id, 0)
        # Iterative pre-order walk: a hostile, deeply nested payload must not hit the recursion
        # limit.
        stack: list[tuple[Any, str | None, str]] = [
            (node, None, str(i + 1)) for i, node in reversed(list(enumerate(nodes)))
        ]
        while stack:
            node, parent_id, position = stack.pop()
            own_id = self._add_node(
                node, article=article, author=author, parent_id=parent_id, position=position
            )
            children = node.get("children", []) if isinstance(node, dict) else []
            if not isinstance(children, list):
                where = own_id or f"article {article.id}, comment #{position}"
                self.rejected.append(
                    Rejection(f"{where}: children must be a list; its replies were skipped", where)
                )
                continue
            if own_id is not None and author:
                self._note_author_reply(own_id, children, author)
            # Replies of a rejected comment are still good comments; they lose only their parent
            # link.
            for i, child in reversed(list(enumerate(children))):
                stack.append((child, own_id, f"{position}.{i + 1}"))
        return True

    def _add_node(
        self,
        node: Any,
        *,
        article: SourceArticle,
        author: str | None,
        parent_id: str | None,
        position: str,
    ) -> str | None:
        """Check and keep one comment; return its id when replies may point at it."""
        where = f"article {article.id}, comment #{position}"
        self.node_counts[article.id] = self.node_counts.get(article.id, 0) + 1
        if not isinstance(node, dict):
            return self._reject(
                f"{where} is not a JSON object ({type(node).__name__}); skipped", where
            )
        id_code = node.get("id_code")
        if not isinstance(id_code, str) or not COMMENT_ID_RE.fullmatch(id_code):
            return self._reject(
                f"{where}: id_code {_show(id_code)} does not match {COMMENT_ID_SHAPE} "
                "(it would become a file name); skipped",
                where,
            )
        if id_code in self._ids:
            return self._reject(
                f"comment {id_code} ({where}) appears twice; the later copy was skipped", id_code
            )
        # Present in the thread, whatever its content: a known comment with a bad body is not
        # deleted.
        self.thread_ids.setdefault(article.id, set()).add(id_code)
        body = node.get("body_html")
        if not isinstance(body, str):
            return self._reject(
                f"comment {id_code}: body_html must be a string, got {_show(body)}; skipped",
                id_code,
            )
        self._ids.add(id_code)
        text = html_to_text(body)
        self.parent_texts[id_code] = text
        if text in SKIPPED_BODIES:
            self.gone[id_code] = GONE_BY_BODY[text]
            return id_code
        username = _username(node)
        if username is None:
            # Deleted account: nobody to reply to.
            self.gone[id_code] = ("deleted", "its author's dev.to account is gone")
            return id_code
        if isinstance(username, str):
            self._authors[id_code] = username
        if isinstance(username, Rejection):
            return self._reject(
                f"comment {id_code}: {username.message}; skipped", id_code, keep_id=True
            )
        if author and username.lower() == author.lower() and not self.include_own:
            return id_code
        comment = self._build(
            node,
            id_code=id_code,
            article=article,
            parent_id=parent_id,
            username=username,
            text=text,
            article_author=author,
        )
        if comment is not None:
            self.comments.append(comment)
        return id_code

    def _build(
        self,
        node: dict[str, Any],
        *,
        id_code: str,
        article: SourceArticle,
        parent_id: str | None,
        username: str,
        text: str,
        article_author: str | None,
    ) -> Comment | None:
        created_at = node.get("created_at")
        problem = _created_at_problem(created_at)
        url = node.get("url")
        if problem is None and url is not None and not isinstance(url, str):
            problem = f"url must be a string, got {_show(url)}"
        if problem is not None:
            self._reject(f"comment {id_code}: {problem}; skipped", id_code, keep_id=True)
            return None
        parent_author = self._authors.get(parent_id) if parent_id else None
        parent_text = self.parent_texts.get(parent_id) if parent_id else None
        try:
            return Comment(
                id=id_code,
                article_id=article.id,
                article_title=article.title,
                article_url=article.url,
                parent_id=parent_id,
                author=username,
                created_at=node["created_at"],
                text=text,
                url=url or comment_url(self.site or site_of(article.url), username, id_code),
                parent_author=parent_author,
                parent_excerpt=excerpt(parent_text)
                if parent_text and parent_text not in SKIPPED_BODIES
                else None,
                answers_author=bool(
                    parent_author
                    and article_author
                    and parent_author.lower() == article_author.lower()
                ),
            )
        except ValidationError as exc:  # defensive: every field was checked above
            self._reject(
                f"comment {id_code}: {exc.errors()[0]['msg']}; skipped", id_code, keep_id=True
            )
            return None

    def _note_author_reply(self, comment_id: str, children: list[Any], author: str) -> None:
        """Record when the author first answered ``comment_id`` directly (a child, not a deeper
        descendant: a reply further down answers someone else in the thread)."""
        earliest: tuple[datetime, str] | None = None
        latest: tuple[datetime, str] | None = None
        nodes: list[Reply] = []
        for child in children:
            if not isinstance(child, dict):
                continue
            username = _username(child)
            created_at = child.get("created_at")
            if not isinstance(username, str) or username.lower() != author.lower():
                continue
            if not isinstance(created_at, str) or _created_at_problem(created_at) is not None:
                continue
            moment = parse_iso(created_at)
            if earliest is None or moment < earliest[0]:
                earliest = (moment, created_at)
            if latest is None or moment > latest[0]:
                latest = (moment, created_at)
            id_code, body = child.get("id_code"), child.get("body_html")
            if (
                isinstance(id_code, str)
                and COMMENT_ID_RE.fullmatch(id_code)
                and isinstance(body, str)
            ):
                nodes.append(
                    Reply(id=id_code, created_at=created_at, excerpt=excerpt(html_to_text(body)))
                )
        if earliest is not None and latest is not None:
            self.author_replies[comment_id] = earliest[1]
            self.latest_replies[comment_id] = latest[1]
            self.reply_nodes[comment_id] = nodes

    def _reject(self, message: str, item: str, *, keep_id: bool = False) -> str | None:
        self.rejected.append(Rejection(message, item))
        # A comment rejected for its content still has a safe id its replies may point at.
        return item if keep_id else None


def _username(node: dict[str, Any]) -> str | None | Rejection:
    """The author's username; None for a deleted account (empty user); a Rejection if malformed."""
    if "user" not in node:
        return Rejection("missing field user", None)
    user = node["user"]
    if user is None or user == {}:
        return None
    if not isinstance(user, dict):
        return Rejection(f"user must be an object, got {_show(user)}", None)
    username = user.get("username")
    if username is None or username == "":
        return None
    if not isinstance(username, str):
        return Rejection(f"user.username must be a string, got {_show(username)}", None)
    return username


def _created_at_problem(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"created_at must be a timestamp string, got {_show(value)}"
    try:
        parse_iso(value)
    except ValueError:
        return f"created_at {_show(value)} is not an ISO 8601 timestamp"
    return None


def site_of(url: str) -> str:
    """The ``scheme://host`` of ``url`` (an article's url, or DEVTO_BASE_URL), else ``https://dev.to``."""
    parts = urlsplit(url)
    return (
        f"{parts.scheme}://{parts.netloc}"
        if parts.scheme in ("http", "https") and parts.netloc
        else "https://dev.to"
    )


def api_site(base_url: str) -> str:
    """The site a Forem API serves: DEVTO_BASE_URL without its trailing ``/api``, and without
    credentials (every comment's permalink starts with it, SPEC §15.5)."""
    return split_credentials(base_url)[0].rstrip("/").removesuffix("/api")


def comment_url(site: str, username: str, id_code: str) -> str:
    """``{site}/{username}/comment/{id_code}``: Forem's comment permalink (the API sends no url)."""
    # errors="replace": a username that escapes a lone surrogate in the payload's JSON cannot be
    # UTF-8 encoded; strict quoting raised and sank the whole payload, good comments included.
    return f"{site.rstrip('/')}/{quote(username, safe='', errors='replace')}/comment/{id_code}"
