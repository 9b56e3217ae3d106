"""The dev.to client against a loopback Forem-like HTTP server (127.0.0.1, real sockets) (SPEC §5)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from pydantic import SecretStr

from watcher.config import Settings
from watcher.errors import SourceUnavailable
from watcher.models import SeenArticle, SeenFile
from watcher.source import FetchResult, fetch_devto

KEY = "devto-loopback-KEY-987"


@dataclass
class FakeForem:
    """A tiny Forem: /api/articles (paged), /api/articles/me/published, /api/comments?a_id=.

    ``comments`` maps an article id to a JSON-able payload or to raw (status, bytes); every
    request is recorded as (path, query dict, headers dict).
    """

    base_url: str = ""
    articles: list[dict[str, Any]] = field(default_factory=list)
    comments: dict[int, Any] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str], dict[str, str]]] = field(default_factory=list)

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, bytes]:
        if path in ("/api/articles", "/api/articles/me/published"):
            page, per_page = int(query.get("page", 1)), int(query.get("per_page", 30))
            return 200, json.dumps(self.articles[(page - 1) * per_page: page * per_page]).encode()
        if path == "/api/comments" and int(query.get("a_id", 0)) in self.comments:
            payload = self.comments[int(query["a_id"])]
            return payload if isinstance(payload, tuple) else (200, json.dumps(payload).encode())
        return 404, b'{"error":"not found","status":404}'


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = dict(parse_qsl(parts.query))
        forem = self.server.forem
        forem.requests.append((parts.path, query, {k.lower(): v for k, v in self.headers.items()}))
        status, body = forem.answer(parts.path, query)
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if body[:1] in (b"[", b"{") else "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    forem: FakeForem


@pytest.fixture
def forem() -> Iterator[FakeForem]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.forem = FakeForem(base_url=f"http://127.0.0.1:{server.server_address[1]}/api")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server.forem
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _article(i: int, count: int = 1) -> dict[str, Any]:
    return {"type_of": "article", "id": i, "title": f"Post {i}", "url": f"https://dev.to/maya/post-{i}",
            "comments_count": count, "user": {"name": "Maya", "username": "maya"}}


def _comment(id_code: Any, username: str = "priyan", body: str | None = None,
             children: list | None = None) -> dict[str, Any]:
    return {"type_of": "comment", "id_code": id_code, "created_at": "2026-05-14T09:12:44Z",
            "body_html": body if body is not None else f"<p>comment {id_code}</p>",
            "user": {"name": username.title(), "username": username} if username else {},
            "children": children or []}


def _fetch(forem: FakeForem, tmp_path: Path, seen: SeenFile | None = None, **kw: Any) -> FetchResult:
    clock = FakeClock()
    per_page = kw.pop("per_page", 100)
    kw.setdefault("devto_username", "maya")
    settings = Settings(data_dir=tmp_path / "data", devto_base_url=forem.base_url, **kw)
    return fetch_devto(settings, seen or SeenFile(), clock=clock, sleep=clock.sleep, per_page=per_page)


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def test_loopback_pages_across_several_pages_and_sends_headers(forem: FakeForem, tmp_path: Path) -> None:
    """8 articles at 3 per page arrive from 3 pages, every request carrying Accept and User-Agent."""
    forem.articles = [_article(i, 0) for i in range(1, 9)]
    result = _fetch(forem, tmp_path, per_page=3)
    assert [a.id for a in result.articles] == list(range(1, 9))
    assert [(p, q["page"]) for p, q, _ in forem.requests] == [("/api/articles", str(n)) for n in (1, 2, 3)]
    for _, query, headers in forem.requests:
        assert query["username"] == "maya"
        assert headers["accept"] == "application/vnd.forem.api-v1+json"
        assert headers["user-agent"].startswith("devto-watcher/")


def test_loopback_api_key_uses_the_private_listing(forem: FakeForem, tmp_path: Path) -> None:
    """With a key: /articles/me/published, the api-key header, and no username in the query."""
    forem.articles = [_article(1, 0)]
    _fetch(forem, tmp_path, devto_username=None, devto_api_key=SecretStr(KEY))
    ((path, query, headers),) = forem.requests
    assert path == "/api/articles/me/published" and "username" not in query and headers["api-key"] == KEY


def test_loopback_flattens_threads_with_parent_ids(forem: FakeForem, tmp_path: Path) -> None:
    """Nested children become a flat list in thread order, each reply naming its parent."""
    forem.articles = [_article(1, 5)]
    forem.comments[1] = [
        _comment("a1", children=[_comment("b1", children=[_comment("c1")]), _comment("b2")]),
        _comment("a2"),
    ]
    result = _fetch(forem, tmp_path)
    assert [(c.id, c.parent_id) for c in result.comments] == [
        ("a1", None), ("b1", "a1"), ("c1", "b1"), ("b2", "a1"), ("a2", None)
    ]
    assert result.comments[0].text == "comment a1" and result.comments[0].url == "https://dev.to/priyan/comment/a1"
    assert forem.requests[-1][:2] == ("/api/comments", {"a_id": "1"})


def test_loopback_skips_deleted_hidden_and_own_comments(forem: FakeForem, tmp_path: Path) -> None:
    """Deleted, hidden, user-less and the author's own comments are left out; own text stays quotable."""
    forem.articles = [_article(1, 6)]
    forem.comments[1] = [
        _comment("del1", username="", body="<p>[deleted]</p>", children=[_comment("r1")]),
        _comment("hid1", username="", body="<p>[hidden by post author]</p>"),
        _comment("q1", children=[_comment("own1", username="maya", body="<p>Thanks &amp; welcome</p>",
                                          children=[_comment("r2")])]),
    ]
    result = _fetch(forem, tmp_path)
    assert [(c.id, c.parent_id) for c in result.comments] == [("r1", "del1"), ("q1", None), ("r2", "own1")]
    assert result.parent_texts["own1"] == "Thanks & welcome" and result.rejected == []


def test_loopback_include_own_comments_keeps_the_authors_replies(forem: FakeForem, tmp_path: Path) -> None:
    """The configurable switch brings own comments back."""
    forem.articles = [_article(1, 1)]
    forem.comments[1] = [_comment("own1", username="maya")]
    assert [c.author for c in _fetch(forem, tmp_path, include_own_comments=True).comments] == ["maya"]


def test_loopback_steady_state_300_articles_makes_pages_plus_5_requests(forem: FakeForem, tmp_path: Path) -> None:
    """A 300-article account with 5 changed counts: exactly 4 listing pages + 5 comment requests."""
    changed = {3, 77, 150, 151, 300}
    forem.articles = [_article(i, 2 + (i in changed)) for i in range(1, 301)]
    forem.comments = {i: [_comment(f"n{i}")] for i in changed}
    seen = SeenFile(articles={str(i): SeenArticle(title=f"Post {i}", comments_count=2, checked_at="2026-05-01T00:00:00Z")
                              for i in range(1, 301)})
    result = _fetch(forem, tmp_path, seen)
    assert len(forem.requests) == 4 + 5
    assert sorted(int(q["a_id"]) for p, q, _ in forem.requests if p == "/api/comments") == sorted(changed)
    assert {c.id for c in result.comments} == {f"n{i}" for i in changed}


# --- bad input: rejected by item, good items kept, nothing written anywhere --------------------

_GOOD = _comment("good1")
_BAD_PAYLOADS: dict[str, tuple[Any, str]] = {
    "path traversal id": ([_comment("../../etc"), _GOOD], "does not match"),
    "absolute path id": ([_comment("/etc/passwd"), _GOOD], "does not match"),
    "missing fields": ([{"id_code": "nofield1", "children": []}, _GOOD], "body_html must be a string"),
    "mistyped created_at": ([{**_comment("typed1"), "created_at": 20260514}, _GOOD], "created_at must be"),
    "mistyped user": ([{**_comment("typed2"), "user": ["priyan"]}, _GOOD], "user must be an object"),
}


@pytest.mark.parametrize("case", sorted(_BAD_PAYLOADS))
def test_loopback_bad_comment_is_rejected_good_kept_and_nothing_written(
    forem: FakeForem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Each bad item is one rejection with a clear message; its good sibling and the other article survive."""
    payload, expected = _BAD_PAYLOADS[case]
    (tmp_path / "data" / "inbox").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "data" / "inbox")  # where a leaked relative path would land
    before = _tree(tmp_path)
    forem.articles = [_article(1, 2), _article(2, 1)]
    forem.comments = {1: payload, 2: [_comment("other2")]}
    result = _fetch(forem, tmp_path)
    assert [c.id for c in result.comments] == ["good1", "other2"]
    (rejection,) = result.rejected
    assert expected in rejection.message
    assert _tree(tmp_path) == before
    assert not (tmp_path / "etc").exists()


def test_loopback_invalid_json_rejects_that_article_and_writes_nothing(
    forem: FakeForem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A comments body that is not JSON rejects only its article, which is left for the next scan."""
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    forem.articles = [_article(1, 2), _article(2, 1)]
    forem.comments = {1: (200, b'[{"id_code": "x1", '), 2: [_comment("other2")]}
    result = _fetch(forem, tmp_path)
    assert [c.id for c in result.comments] == ["other2"] and result.fetched_article_ids == {2}
    assert result.rejected[0].item == "article 1" and "invalid JSON" in result.rejected[0].message
    assert _tree(tmp_path) == before


def test_loopback_non_json_5xx_is_source_unavailable_and_writes_nothing(
    forem: FakeForem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An HTML 502 page mid-fetch stops everything with exit 3 before anything could be written."""
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    forem.articles = [_article(1, 1)]
    forem.comments = {1: (502, b"<html><body>502 Bad Gateway</body></html>")}
    with pytest.raises(SourceUnavailable, match="HTTP 502") as info:
        _fetch(forem, tmp_path)
    assert info.value.exit_code == 3
    assert _tree(tmp_path) == before


def test_loopback_unreachable_server_is_source_unavailable(tmp_path: Path) -> None:
    """Nothing listening on the port: a clear 'cannot reach dev.to' with exit 3."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = Settings(data_dir=tmp_path / "data", devto_username="maya", devto_base_url=f"http://127.0.0.1:{port}/api")
    clock = FakeClock()
    with pytest.raises(SourceUnavailable, match="cannot reach dev.to"):
        fetch_devto(settings, SeenFile(), clock=clock, sleep=clock.sleep)
