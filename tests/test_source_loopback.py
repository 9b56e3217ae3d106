"""The dev.to client against a loopback Forem-like HTTP server (127.0.0.1, real sockets) (SPEC §5)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _fakes.clock import FakeClock
from _fakes.forem import FakeForem, serving_forem
from _fakes.http import closed_port
from pydantic import SecretStr

from watcher.config import Settings
from watcher.errors import SourceUnavailable
from watcher.models import SeenArticle, SeenFile
from watcher.source import FetchResult, fetch_devto
from watcher.state.seen import record_article

KEY = "devto-loopback-KEY-987"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(100.0)


@pytest.fixture
def forem(clock: FakeClock) -> Iterator[FakeForem]:
    """A Forem on 127.0.0.1 whose request log and rate limit read the test's fake clock."""
    fake = FakeForem(clock=clock)
    with serving_forem(fake) as base_url:
        fake.site = base_url.removesuffix("/api")
        yield fake


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
    clock = forem.clock if isinstance(forem.clock, FakeClock) else FakeClock(100.0)
    per_page = kw.pop("per_page", 100)
    full = kw.pop("full", False)
    kw.setdefault("devto_username", "maya")
    settings = Settings(data_dir=tmp_path / "data", devto_base_url=f"{forem.site}/api", **kw)
    return fetch_devto(settings, seen or SeenFile(), full=full, clock=clock, sleep=clock.sleep, per_page=per_page)


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def test_loopback_pages_across_several_pages_and_sends_headers(forem: FakeForem, tmp_path: Path) -> None:
    """8 articles at 3 per page arrive from 3 pages (and the empty 4th), every request carrying
    Accept and User-Agent."""
    forem.raw_articles = [_article(i, 0) for i in range(1, 9)]
    result = _fetch(forem, tmp_path, per_page=3)
    assert [a.id for a in result.articles] == list(range(1, 9))
    assert [(r.path, r.query["page"]) for r in forem.requests] == [("/api/articles", str(n)) for n in (1, 2, 3, 4)]
    for r in forem.requests:
        assert r.query["username"] == "maya"
        assert r.headers["accept"] == "application/vnd.forem.api-v1+json"
        assert r.headers["user-agent"].startswith("devto-watcher/")


def test_loopback_api_key_uses_the_private_listing(forem: FakeForem, tmp_path: Path) -> None:
    """With a key: /articles/me/published, the api-key header, and no username in the query."""
    forem.keys[KEY] = "maya"
    forem.publish("maya")
    _fetch(forem, tmp_path, devto_username=None, devto_api_key=SecretStr(KEY))
    first = forem.requests[0]
    assert first.path == "/api/articles/me/published" and "username" not in first.query
    assert first.headers["api-key"] == KEY


def test_loopback_flattens_threads_with_parent_ids(forem: FakeForem, tmp_path: Path) -> None:
    """Nested children become a flat list in thread order, each reply naming its parent."""
    forem.raw_articles = [_article(1, 5)]
    forem.raw_threads[1] = [
        _comment("a1", children=[_comment("b1", children=[_comment("c1")]), _comment("b2")]),
        _comment("a2"),
    ]
    result = _fetch(forem, tmp_path)
    assert [(c.id, c.parent_id) for c in result.comments] == [
        ("a1", None), ("b1", "a1"), ("c1", "b1"), ("b2", "a1"), ("a2", None)
    ]
    assert result.comments[0].text == "comment a1" and result.comments[0].url == f"{forem.site}/priyan/comment/a1"
    assert (forem.requests[-1].path, forem.requests[-1].query) == ("/api/comments", {"a_id": "1"})


def test_loopback_skips_deleted_hidden_and_own_comments(forem: FakeForem, tmp_path: Path) -> None:
    """Deleted, hidden, user-less and the author's own comments are left out; own text stays quotable."""
    forem.raw_articles = [_article(1, 6)]
    forem.raw_threads[1] = [
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
    forem.raw_articles = [_article(1, 1)]
    forem.raw_threads[1] = [_comment("own1", username="maya")]
    assert [c.author for c in _fetch(forem, tmp_path, include_own_comments=True).comments] == ["maya"]


def test_loopback_steady_state_300_articles_makes_pages_plus_5_requests(forem: FakeForem, tmp_path: Path) -> None:
    """A 300-article account with 5 changed counts: exactly 4 listing pages + 5 comment requests."""
    changed = {3, 77, 150, 151, 300}
    forem.raw_articles = [_article(i, 2 + (i in changed)) for i in range(1, 301)]
    forem.raw_threads = {i: [_comment(f"n{i}")] for i in changed}
    seen = SeenFile(articles={str(i): SeenArticle(title=f"Post {i}", comments_count=2, checked_at="2026-05-01T00:00:00Z")
                              for i in range(1, 301)})
    result = _fetch(forem, tmp_path, seen)
    assert len(forem.requests) == 4 + 5  # 3 full pages, the empty 4th, 5 threads
    assert sorted(int(r.query["a_id"]) for r in forem.requests if r.path == "/api/comments") == sorted(changed)
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
    forem.raw_articles = [_article(1, 2), _article(2, 1)]
    forem.raw_threads = {1: payload, 2: [_comment("other2")]}
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
    forem.raw_articles = [_article(1, 2), _article(2, 1)]
    forem.raw_threads = {1: (200, b'[{"id_code": "x1", '), 2: [_comment("other2")]}
    result = _fetch(forem, tmp_path)
    assert [c.id for c in result.comments] == ["other2"] and result.fetched_article_ids == {2}
    assert result.rejected[0].item == "article 1" and "invalid JSON" in result.rejected[0].message
    assert _tree(tmp_path) == before


def test_loopback_non_json_5xx_is_source_unavailable_and_writes_nothing(
    forem: FakeForem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An HTML 502 page mid-fetch stops the fetch (interrupted, exit 3) and nothing is written."""
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    forem.raw_articles = [_article(1, 1)]
    forem.raw_threads = {1: (502, b"<html><body>502 Bad Gateway</body></html>")}
    result = _fetch(forem, tmp_path)
    assert result.interrupted is not None and "HTTP 502" in str(result.interrupted)
    assert result.interrupted.exit_code == 3 and result.fetched_article_ids == set()
    assert _tree(tmp_path) == before


def test_loopback_unreachable_server_is_source_unavailable(tmp_path: Path) -> None:
    """Nothing listening on the port: a clear 'cannot reach dev.to' with exit 3."""
    url = f"http://127.0.0.1:{closed_port()}/api"
    settings = Settings(data_dir=tmp_path / "data", devto_username="maya", devto_base_url=url)
    clock = FakeClock(100.0)
    with pytest.raises(SourceUnavailable, match="cannot reach dev.to"):
        fetch_devto(settings, SeenFile(), clock=clock, sleep=clock.sleep)


# --- the stateful Forem over real sockets (SPEC §13.3) ----------------------------------------------


def test_loopback_cancel_out_is_found_and_the_next_scan_is_idle(forem: FakeForem, tmp_path: Path) -> None:
    """A new comment and a childless deletion between scans: the count is unchanged, the comment
    is found (last_comment_at moved), and a scan after that fetches no thread."""
    forem.users.update({"priyan", "lena"})
    post = forem.publish("maya")
    spam = forem.comment(post, "lena", "cheap followers")
    first = _fetch(forem, tmp_path)
    seen = record_article(SeenFile(), post, title="t", url=None, comments_count=1,
                          last_comment_at=first.articles[0].last_comment_at)
    new = forem.comment(post, "priyan", "how does it scale?")
    forem.delete(spam)
    second = _fetch(forem, tmp_path, seen)
    assert [c.id for c in second.comments] == [new] and second.articles[0].comments_count == 1
    seen = record_article(seen, post, title="t", url=None, comments_count=1,
                          last_comment_at=second.articles[0].last_comment_at)
    forem.requests.clear()
    assert _fetch(forem, tmp_path, seen).fetched_article_ids == set()
    assert [r.path for r in forem.requests] == ["/api/articles", "/api/articles"]


def test_loopback_edge_403_html_is_exit_3_about_the_bot_filter(forem: FakeForem, tmp_path: Path) -> None:
    """An HTML 403 page over a real socket: exit 3, the User-Agent named, no DEVTO_USERNAME hint."""
    forem.edge_block = True
    with pytest.raises(SourceUnavailable, match=r"edge or bot filter \(HTTP 403\)") as info:
        _fetch(forem, tmp_path)
    assert info.value.exit_code == 3 and "User-Agent" in str(info.value)
    assert "DEVTO_USERNAME" not in str(info.value)
