"""A small stateful Forem for the source tests: the v1 endpoints watcher reads, with Forem's rules.

Kept from forem/forem (``app/models/comment.rb``, the v1 jbuilder views, ``rack_attack.rb``):

- ``id_code`` is the comment id in base 26 (``id.to_s(26)``: digits 0–9 and a–p);
- ``comments_count`` is a counter-culture column: +1 on create, −1 on destroy. Deleting a comment
  that has replies only flags it (``<p>[deleted]</p>``, ``user: {}``, count unchanged); hiding and
  editing never change it;
- ``last_comment_at`` is touched on every comment save (create, edit, flag-delete, hide) and
  destroy; the public listing sends it, ``/articles/me/published`` does not;
- ``per_page`` is capped (``page_cap``; Forem's own cap is 1000); the API sends no comment url;
- ``/users/by_username?url=`` is 404 for an unknown name;
- with ``rate_limit`` on, rack_attack's 3 GETs per fixed one-second window (by the injected
  ``clock``) are enforced with a 429 and ``Retry-After``;
- ``edge_block`` answers every request 403 with an HTML page, as dev.to's CDN/bot filter does;
- a comment's JSON is Forem's v1 view (``app/views/api/v1/comments/_comment.json.jbuilder``): a
  deleted one is ``<p>[deleted]</p>`` with ``user: {}``, checked before hidden, which is
  ``<p>[hidden by post author]</p>`` with ``user: {}``; both keep ``id_code``, ``created_at`` and
  their replies (``children``). A deleted comment without replies is destroyed (gone from the
  thread, ``comments_count`` −1; ``Comment#destroy`` when childless);
- ``/comments`` pages its root threads when ``thread_page_cap`` is set, as newer Forems do
  (``Api::CommentsController#index``: ``page``/``per_page``, 50 a page by default).

``ForemSource`` is the devto source against this fake over loopback HTTP (``serving_forem``), with
a :class:`FakeClock` for pacing, for tests that run whole scans in process.

``handle`` serves an ``httpx.Request`` (for ``httpx.MockTransport``); ``answer`` is the same for
the loopback HTTP server. Every request is recorded with its time on ``clock``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx

DIGITS = "0123456789abcdefghijklmnop"
EDGE_403 = b"<!DOCTYPE html><html><head><title>403 Forbidden</title></head><body>Request blocked.</body></html>"
NOT_FOUND = b'{"error":"not found","status":404}'


def base26(n: int) -> str:
    """Ruby's ``n.to_s(26)``."""
    out = ""
    while True:
        n, digit = divmod(n, 26)
        out = DIGITS[digit] + out
        if n == 0:
            return out


@dataclass
class Article:
    id: int
    username: str
    title: str
    comments_count: int = 0
    last_comment_at: datetime | None = None


@dataclass
class Node:
    id: int
    article_id: int
    username: str
    text: str
    created_at: datetime
    parent: int | None
    deleted: bool = False
    hidden: bool = False


@dataclass
class Request:
    at: float
    path: str
    query: dict[str, str]
    headers: dict[str, str]


@dataclass
class FakeForem:
    clock: Callable[[], float] = time.monotonic
    page_cap: int = 1000
    site: str = "https://dev.to"
    keys: dict[str, str] = field(default_factory=dict)  # api-key -> username
    rate_limit: bool = False
    edge_block: bool = False
    sends_last_comment_at: bool = True  # False: an older Forem whose listing lacks the field
    articles: dict[int, Article] = field(default_factory=dict)
    nodes: dict[int, Node] = field(default_factory=dict)
    users: set[str] = field(default_factory=set)
    requests: list[Request] = field(default_factory=list)
    # path -> scripted answers (status, headers, body), served before the real answer (None: the real one)
    faults: dict[str, list[tuple[int, dict[str, str], bytes] | None]] = field(default_factory=dict)
    # raw payload overrides for bad-input tests: article id -> JSON-able or (status, bytes)
    raw_threads: dict[int, Any] = field(default_factory=dict)
    raw_articles: list[Any] | None = None
    now: datetime = field(default_factory=lambda: datetime(2026, 5, 1, 9, 0, tzinfo=UTC))
    thread_page_cap: int | None = None  # root threads per /comments answer (None: all)
    step: timedelta = timedelta(minutes=7)  # how far dev.to's clock moves with each change
    _next_article: int = 1000
    _next_comment: int = 3_000_000  # dev.to's ids are in the millions: 5-character id_codes
    _windows: dict[int, int] = field(default_factory=dict)

    # --- the world ----------------------------------------------------------------------------

    def tick(self) -> datetime:
        self.now += self.step
        return self.now

    def publish(self, username: str, title: str | None = None) -> int:
        self.users.add(username)
        self._next_article += 1
        aid = self._next_article
        self.articles[aid] = Article(aid, username, title or f"Post {aid}")
        return aid

    def comment(self, article_id: int, username: str, text: str | None = None, *, parent: str | None = None) -> str:
        self.users.add(username)
        self._next_comment += 1
        cid = self._next_comment
        self.nodes[cid] = Node(cid, article_id, username, text or f"comment {base26(cid)}", self.tick(),
                               self._id(parent) if parent else None)
        article = self.articles[article_id]
        article.comments_count += 1
        article.last_comment_at = self.now
        return base26(cid)

    def edit(self, id_code: str, text: str) -> None:
        node = self.nodes[self._id(id_code)]
        node.text = text
        self.articles[node.article_id].last_comment_at = self.tick()

    def hide(self, id_code: str, hidden: bool = True) -> None:
        node = self.nodes[self._id(id_code)]
        node.hidden = hidden
        self.articles[node.article_id].last_comment_at = self.tick()

    def edit_quietly(self, id_code: str, text: str) -> None:
        """An edit whose ``last_comment_at`` did not move (a Forem that does not touch it, or a
        listing served from a stale cache): only ``scan --full`` can see it."""
        self.nodes[self._id(id_code)].text = text

    def delete(self, id_code: str) -> None:
        """A comment with replies is flagged deleted (count unchanged); one without is destroyed."""
        cid = self._id(id_code)
        node = self.nodes[cid]
        article = self.articles[node.article_id]
        if any(n.parent == cid for n in self.nodes.values()):
            node.deleted = True
        else:
            del self.nodes[cid]
            article.comments_count -= 1
        article.last_comment_at = self.tick()

    def fail(self, path: str, status: int, *, times: int = 1, after: int = 0, headers: dict[str, str] | None = None,
             body: bytes = b'{"error":"scripted"}') -> None:
        """Answer the next ``times`` requests of ``path`` with ``status``, after ``after`` normal ones."""
        script: list[tuple[int, dict[str, str], bytes] | None] = [None] * after
        self.faults.setdefault(path, []).extend(script + [(status, headers or {}, body)] * times)

    @staticmethod
    def _id(id_code: str) -> int:
        return int(id_code, 26)

    # --- payloads -----------------------------------------------------------------------------

    def article_json(self, article: Article, *, public: bool) -> dict[str, Any]:
        slug = f"post-{base26(article.id)}"
        data: dict[str, Any] = {
            "type_of": "article", "id": article.id, "title": article.title, "slug": slug,
            "path": f"/{article.username}/{slug}", "url": f"{self.site}/{article.username}/{slug}",
            "comments_count": article.comments_count, "published_at": "2026-04-30T12:00:00Z",
            "user": {"name": article.username.title(), "username": article.username},
        }
        if public and self.sends_last_comment_at:
            data["last_comment_at"] = _stamp(article.last_comment_at)
        return data

    def thread(self, article_id: int) -> list[dict[str, Any]]:
        def node_json(node: Node) -> dict[str, Any]:
            data: dict[str, Any] = {"type_of": "comment", "id_code": base26(node.id), "created_at": _stamp(node.created_at)}
            if node.deleted or node.hidden:
                data["body_html"] = "<p>[deleted]</p>" if node.deleted else "<p>[hidden by post author]</p>"
                data["user"] = {}
            else:
                data["body_html"] = f"<p>{node.text}</p>"
                data["user"] = {"name": node.username.title(), "username": node.username}
            data["children"] = [node_json(n) for n in ordered if n.parent == node.id]
            return data

        ordered = sorted((n for n in self.nodes.values() if n.article_id == article_id), key=lambda n: n.id)
        roots = [node_json(n) for n in ordered if n.parent is None]
        return roots if self.thread_page_cap is None else roots[: self.thread_page_cap]

    # --- serving ------------------------------------------------------------------------------

    def answer(self, path: str, query: dict[str, str], headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        self.requests.append(Request(self.clock(), path, dict(query), dict(headers)))
        if self.edge_block:
            return 403, {"content-type": "text/html"}, EDGE_403
        if self.rate_limit:
            window = int(self.clock() // 1)
            self._windows[window] = self._windows.get(window, 0) + 1
            if self._windows[window] > 3:
                return 429, {"retry-after": "1"}, b'{"error":"Retry later","status":429}'
        scripted = self.faults[path].pop(0) if self.faults.get(path) else None
        if scripted is not None:
            return scripted
        status, body = self._route(path, query, headers)
        if isinstance(body, bytes):  # a raw override
            kind = "application/json" if body[:1] in (b"[", b"{") else "text/html"
            return status, {"content-type": kind}, body
        return status, {"content-type": "application/json"}, NOT_FOUND if body is None else json.dumps(body).encode()

    def _route(self, path: str, query: dict[str, str], headers: dict[str, str]) -> tuple[int, Any]:
        if path == "/api/articles/me/published":
            owner = self.keys.get(headers.get("api-key", ""))
            if owner is None:
                return 401, {"error": "unauthorized", "status": 401}
            return 200, self._page(owner, query, public=False)
        if path == "/api/articles":
            return 200, self._page(query.get("username", ""), query, public=True)
        if path == "/api/comments":
            aid = int(query.get("a_id", "0"))
            if aid in self.raw_threads:
                raw = self.raw_threads[aid]
                return raw if isinstance(raw, tuple) else (200, raw)
            return (200, self.thread(aid)) if aid in self.articles else (404, None)
        if path == "/api/users/by_username":
            name = query.get("url", "")
            return (200, {"type_of": "user", "username": name, "name": name.title()}) if name in self.users else (404, None)
        return 404, None

    def _page(self, username: str, query: dict[str, str], *, public: bool) -> list[Any]:
        page, per_page = int(query.get("page", 1)), min(int(query.get("per_page", 30)), self.page_cap)
        if self.raw_articles is not None:
            items: list[Any] = self.raw_articles
        else:
            mine = sorted((a for a in self.articles.values() if a.username == username), key=lambda a: -a.id)
            items = [self.article_json(a, public=public) for a in mine]  # newest first, as Forem lists
        return items[(page - 1) * per_page: page * per_page]

    def handle(self, request: httpx.Request) -> httpx.Response:
        """An ``httpx.MockTransport`` handler."""
        status, headers, body = self.answer(request.url.path, dict(request.url.params),
                                            {k.lower(): v for k, v in request.headers.items()})
        return httpx.Response(status, headers=headers, content=body)

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]


def _stamp(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class _ForemHandler(BaseHTTPRequestHandler):
    forem: FakeForem

    def do_GET(self) -> None:  # the name is http.server API
        parts = urlsplit(self.path)
        status, headers, body = self.forem.answer(parts.path, dict(parse_qsl(parts.query)),
                                                  {k.lower(): v for k, v in self.headers.items()})
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serving_forem(forem: FakeForem) -> Iterator[str]:
    """``forem`` on 127.0.0.1 (real sockets); yields its ``DEVTO_BASE_URL``."""
    from _fakes.provider import serving

    handler = type("Handler", (_ForemHandler,), {"forem": forem})
    with serving(handler) as server:
        host, port = server.server_address[:2]
        yield f"http://{host}:{port}/api"


@dataclass(frozen=True)
class ForemSource:
    """The devto source (``watcher.source.fetch_devto``) as a scan runs it, paced by ``clock``
    instead of the wall clock: its 0.4 s between requests cost no time in a test."""

    clock: Any
    name: str = "devto"

    def fetch(self, settings: Any, index: Any, *, full: bool = False) -> Any:
        from watcher.source import fetch_devto

        return fetch_devto(settings, index, full=full, clock=self.clock, sleep=self.clock.sleep)
