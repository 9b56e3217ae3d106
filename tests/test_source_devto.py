"""The dev.to API client over an injected fake transport: paging, incremental fetches, pacing,
429s, errors (SPEC §5)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from _fakes.clock import FakeClock
from _fakes.http import Wire
from pydantic import SecretStr

import watcher
from watcher.config import Settings
from watcher.errors import ConfigError, SourceUnavailable, exit_code_for
from watcher.models import SeenArticle, SeenFile
from watcher.source import fetch_devto
from watcher.source._devto import retry_after_seconds

BASE = "https://dev.to/api"
KEY = "sk-devto-SECRET-123"


def _settings(tmp_path: Path, **kw: Any) -> Settings:
    kw.setdefault("devto_username", "maya")
    kw.setdefault("devto_base_url", BASE)
    return Settings(data_dir=tmp_path / "data", **kw)


def _article(i: int, count: int = 1) -> dict[str, Any]:
    return {"type_of": "article", "id": i, "title": f"Post {i}", "url": f"https://dev.to/maya/post-{i}",
            "comments_count": count, "user": {"name": "Maya", "username": "maya"}}


def _comment(id_code: str, username: str = "priyan", children: list | None = None) -> dict[str, Any]:
    return {"type_of": "comment", "id_code": id_code, "created_at": "2026-05-14T09:12:44Z",
            "body_html": f"<p>comment {id_code}</p>", "user": {"name": "X", "username": username},
            "children": children or []}


def _seen(counts: dict[int, int]) -> SeenFile:
    return SeenFile(articles={
        str(i): SeenArticle(title=f"Post {i}", comments_count=n, checked_at="2026-05-01T00:00:00Z")
        for i, n in counts.items()
    })


@pytest.fixture
def wire() -> Wire:
    """dev.to for one test: the routes it sets; any other request fails the test."""
    return Wire()


def _paged(articles: list[dict[str, Any]]):
    def handler(request: httpx.Request) -> httpx.Response:
        page, per_page = int(request.url.params["page"]), int(request.url.params["per_page"])
        return httpx.Response(200, json=articles[(page - 1) * per_page: page * per_page])
    return handler


def _fetch(wire: Wire, tmp_path: Path, seen: SeenFile | None = None, clock: FakeClock | None = None,
           **kw: Any):
    clock = clock or FakeClock(5000.0)
    per_page = kw.pop("per_page", 100)
    return fetch_devto(_settings(tmp_path, **kw), seen or SeenFile(), transport=wire.transport(),
                       clock=clock, sleep=clock.sleep, per_page=per_page)


# --- requests and paging --------------------------------------------------------------------


def test_every_request_sends_forem_accept_and_a_real_user_agent(wire: Wire, tmp_path: Path) -> None:
    """Both endpoints get the v1 Accept header and a devto-watcher User-Agent, and no api-key."""
    wire.on("GET", "/api/articles", _paged([_article(1)]))
    wire.on("GET", "/api/comments", httpx.Response(200, json=[_comment("c1")]))
    _fetch(wire, tmp_path)
    assert len(wire.requests) == 3  # listing page 1, the empty page 2, one thread
    for request in wire.requests:
        assert request.headers["accept"] == "application/vnd.forem.api-v1+json"
        assert request.headers["user-agent"].startswith(f"devto-watcher/{watcher.__version__} (+https://")
        assert "api-key" not in request.headers


def test_username_listing_reads_past_a_short_page_until_an_empty_one(wire: Wire,
                                                                    tmp_path: Path) -> None:
    """7 articles at 3 per page: the short page 3 is not the end (a Forem may cap pages lower than
    asked); the empty page 4 is."""
    route = wire.on("GET", "/api/articles", _paged([_article(i, 0) for i in range(1, 8)]))
    result = _fetch(wire, tmp_path, per_page=3)
    assert [a.id for a in result.articles] == list(range(1, 8))
    assert [dict(c.url.params) for c in route.requests] == [
        {"username": "maya", "page": str(p), "per_page": "3"} for p in (1, 2, 3, 4)
    ]


def test_the_listing_asks_for_forems_maximum_page_size(tmp_path: Path) -> None:
    """per_page=1000 by default: a 300-article account is one page and the empty second."""
    import watcher.source._devto as devto

    assert devto.PER_PAGE == 1000


def test_listing_stops_at_an_empty_page(wire: Wire, tmp_path: Path) -> None:
    """6 articles at 3 per page: the empty page 3 ends the listing."""
    route = wire.on("GET", "/api/articles", _paged([_article(i, 0) for i in range(1, 7)]))
    assert len(_fetch(wire, tmp_path, per_page=3).articles) == 6
    assert route.calls == 3


def test_api_key_lists_me_published_with_the_api_key_header(wire: Wire, tmp_path: Path) -> None:
    """With DEVTO_API_KEY the private endpoint is used, the key sent only as a header; the public
    listing of the username it shows is read too, for the change signal it lacks."""
    mine = wire.on("GET", "/api/articles/me/published", _paged([_article(1, 0)]))
    public = wire.on("GET", "/api/articles", _paged([{**_article(1, 0), "last_comment_at": None}]))
    _fetch(wire, tmp_path, devto_username=None, devto_api_key=SecretStr(KEY))
    assert mine.calls == 2 and public.calls == 2
    request = mine.requests[0]
    assert request.headers["api-key"] == KEY
    assert KEY not in str(request.url)
    assert public.requests[0].url.params["username"] == "maya"


def test_a_page_repeated_by_a_server_ignoring_page_ends_the_listing(wire: Wire,
                                                                    tmp_path: Path) -> None:
    """A full page of already-seen ids means the server ignores `page`: stop instead of looping."""
    route = wire.on("GET", "/api/articles", httpx.Response(200, json=[_article(1, 0), _article(2, 0)]))
    assert len(_fetch(wire, tmp_path, per_page=2).articles) == 2
    assert route.calls == 2


# --- incremental -------------------------------------------------------------------------------


def test_steady_state_scan_of_300_articles_makes_pages_plus_5_requests(wire: Wire,
                                                                       tmp_path: Path) -> None:
    """300 known articles, 5 with a new comments_count: 4 listing pages + exactly 5 comment fetches."""
    changed = {17, 42, 123, 250, 299}
    articles = [_article(i, count=3 + (i in changed)) for i in range(1, 301)]
    seen = _seen({i: 3 for i in range(1, 301)})
    wire.on("GET", "/api/articles", _paged(articles))
    comments = wire.on("GET", "/api/comments",
                       lambda r: httpx.Response(200, json=[_comment(f"c{r.url.params['a_id']}")]))
    result = _fetch(wire, tmp_path, seen)
    assert len(wire.requests) == 4 + 5
    assert {int(c.url.params["a_id"]) for c in comments.requests} == changed
    assert result.fetched_article_ids == changed
    assert len(result.articles) == 300


def test_unknown_articles_are_fetched_and_empty_ones_need_no_request(wire: Wire,
                                                                     tmp_path: Path) -> None:
    """A never-seen article with comments is fetched; one with 0 comments is known empty without a call."""
    wire.on("GET", "/api/articles", httpx.Response(200, json=[_article(1, 2), _article(2, 0)]))
    comments = wire.on("GET", "/api/comments", httpx.Response(200, json=[_comment("c1")]))
    result = _fetch(wire, tmp_path)
    assert [c.url.params["a_id"] for c in comments.requests] == ["1"]
    assert result.fetched_article_ids == {1, 2}


# --- pacing --------------------------------------------------------------------------------------


def test_requests_are_paced_to_at_most_three_per_second(wire: Wire, tmp_path: Path) -> None:
    """With an instant server, request starts are at least 0.4 s apart, so no fixed one-second
    window holds a fourth (fake clock, no real sleep)."""
    clock = FakeClock(5000.0)
    starts: list[float] = []

    def record(response: httpx.Response):
        def handler(request: httpx.Request) -> httpx.Response:
            starts.append(clock())
            return response
        return handler

    wire.on("GET", "/api/articles", record(httpx.Response(200, json=[_article(i) for i in range(1, 11)])))
    wire.on("GET", "/api/comments", record(httpx.Response(200, json=[])))
    _fetch(wire, tmp_path, clock=clock)
    assert len(starts) == 12  # page 1, page 2 (all repeats), 10 threads
    assert all(later - earlier >= 0.4 - 1e-9 for earlier, later in itertools.pairwise(starts))
    assert all(later - earlier >= 1.0 for earlier, later in zip(starts, starts[3:], strict=False))
    assert clock.sleeps and all(0 < s <= 0.4 for s in clock.sleeps)


def test_pacing_does_not_sleep_when_requests_are_already_slow(wire: Wire, tmp_path: Path) -> None:
    """A server that takes a second per answer is never made to wait longer."""
    clock = FakeClock(5000.0)

    def slow(json: Any):
        def handler(request: httpx.Request) -> httpx.Response:
            clock.now += 1.0
            return httpx.Response(200, json=json)
        return handler

    wire.on("GET", "/api/articles", slow([_article(1), _article(2)]))
    wire.on("GET", "/api/comments", slow([]))
    _fetch(wire, tmp_path, clock=clock)
    assert clock.sleeps == []


# --- 429 -----------------------------------------------------------------------------------------


def test_short_retry_after_is_honoured_once_then_the_request_retried(wire: Wire,
                                                                     tmp_path: Path) -> None:
    """A 429 with Retry-After 2 sleeps 2 s (injected) and repeats the same request once."""
    clock = FakeClock(5000.0)
    route = wire.on("GET", "/api/articles",
                    httpx.Response(429, headers={"Retry-After": "2"}), httpx.Response(200, json=[_article(1, 0)]),
                    httpx.Response(200, json=[]))
    result = _fetch(wire, tmp_path, clock=clock)
    assert [a.id for a in result.articles] == [1]
    assert route.calls == 3 and route.requests[0].url == route.requests[1].url
    assert 2.0 in clock.sleeps


def test_long_retry_after_stops_with_exit_3_and_says_when(wire: Wire, tmp_path: Path) -> None:
    """Retry-After 120 is not waited for: SourceUnavailable (exit 3) naming the wait and a time."""
    clock = FakeClock(5000.0)
    wire.on("GET", "/api/articles", httpx.Response(429, headers={"Retry-After": "120"}))
    with pytest.raises(SourceUnavailable) as info:
        _fetch(wire, tmp_path, clock=clock)
    assert exit_code_for(info.value) == 3
    assert "120 s" in str(info.value) and "try again after 20" in str(info.value)
    assert clock.sleeps == []


def test_an_absurd_retry_after_stops_with_exit_3_not_a_crash(wire: Wire, tmp_path: Path) -> None:
    """Retry-After 1e12 s cannot be added to "now"; it still stops cleanly with a time to retry."""
    wire.on("GET", "/api/articles", httpx.Response(429, headers={"Retry-After": "1e12"}))
    with pytest.raises(SourceUnavailable, match="try again after") as info:
        _fetch(wire, tmp_path)
    assert exit_code_for(info.value) == 3


def test_retry_after_waits_add_up_to_at_most_10_s_per_fetch(wire: Wire, tmp_path: Path) -> None:
    """Waits of 4 s and 4 s are honoured; a third asking 4 s more than the 2 s left stops the
    fetch midway: interrupted, the first thread kept."""
    clock = FakeClock(5000.0)
    wire.on("GET", "/api/articles",
            httpx.Response(429, headers={"Retry-After": "4"}), httpx.Response(200, json=[_article(1), _article(2)]),
            httpx.Response(200, json=[]))
    comments = wire.on("GET", "/api/comments",
                       httpx.Response(429, headers={"Retry-After": "4"}), httpx.Response(200, json=[_comment("a1")]),
                       httpx.Response(429, headers={"Retry-After": "4"}))
    result = _fetch(wire, tmp_path, clock=clock)
    assert comments.calls == 3 and [c.id for c in result.comments] == ["a1"]
    assert result.fetched_article_ids == {1}
    assert isinstance(result.interrupted, SourceUnavailable) and exit_code_for(result.interrupted) == 3
    assert "2 s left" in str(result.interrupted) and "1 of 2 changed articles" in str(result.interrupted)
    assert sum(s for s in clock.sleeps if s > 0.4) == 8.0


def test_429_without_retry_after_stops(wire: Wire, tmp_path: Path) -> None:
    """No usable Retry-After: stop and tell the user to wait a minute."""
    wire.on("GET", "/api/articles", httpx.Response(429))
    with pytest.raises(SourceUnavailable, match="wait a minute"):
        _fetch(wire, tmp_path)


@pytest.mark.parametrize(("header", "expected"), [
    ("3", 3.0), (" 7.5 ", 7.5), ("0", 0.0), ("-1", None), ("soon", None), ("", None), (None, None),
    ("inf", None), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0), ("Wed, 21 Oct 2015 07:28:00 -0000", 0.0),
])
def test_retry_after_header_parsing(header: str | None, expected: float | None) -> None:
    """Delta-seconds and HTTP dates are understood; garbage is None; a past date means no wait."""
    assert retry_after_seconds(header) == expected


# --- failures --------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_with_a_non_json_body_is_source_unavailable(wire: Wire, tmp_path: Path,
                                                        status: int) -> None:
    """An HTML error page from dev.to stops the fetch with exit 3 and the status in the message."""
    wire.on("GET", "/api/articles", httpx.Response(status, text="<html>Bad Gateway</html>"))
    with pytest.raises(SourceUnavailable, match=f"HTTP {status}") as info:
        _fetch(wire, tmp_path)
    assert exit_code_for(info.value) == 3


def test_5xx_on_a_comments_request_keeps_what_was_fetched(wire: Wire, tmp_path: Path) -> None:
    """A 5xx midway stops the fetch without losing the threads before it: those are returned as
    fetched, the rest are not (they keep their old signal), and ``interrupted`` says why."""
    wire.on("GET", "/api/articles", _paged([_article(1), _article(2), _article(3)]))
    comments = wire.on("GET", "/api/comments",
                       httpx.Response(200, json=[_comment("a1")]), httpx.Response(503, text="down"))
    result = _fetch(wire, tmp_path)
    assert comments.calls == 2  # article 3 is not asked for once dev.to is down
    assert result.fetched_article_ids == {1} and [c.id for c in result.comments] == ["a1"]
    assert isinstance(result.interrupted, SourceUnavailable) and "HTTP 503" in str(result.interrupted)
    assert [a.id for a in result.articles] == [1, 2, 3]


@pytest.mark.parametrize("exc", [httpx.ConnectError("connection refused"), httpx.ReadTimeout("timed out")])
def test_network_errors_are_source_unavailable_without_the_key(wire: Wire, tmp_path: Path,
                                                               exc: Exception) -> None:
    """Connect errors and timeouts stop with exit 3; the api key is in no message."""
    wire.on("GET", "/api/articles/me/published", exc)
    with pytest.raises(SourceUnavailable, match="cannot reach dev.to") as info:
        _fetch(wire, tmp_path, devto_api_key=SecretStr(KEY))
    assert KEY not in str(info.value) and KEY not in repr(info.value.__cause__)


def test_a_refused_api_key_is_a_config_error_that_does_not_repeat_the_key(wire: Wire,
                                                                          tmp_path: Path) -> None:
    """HTTP 401 with DEVTO_API_KEY set: exit 2, a hint, and never the key itself."""
    wire.on("GET", "/api/articles/me/published", httpx.Response(401, json={"error": KEY}))
    with pytest.raises(ConfigError, match="DEVTO_API_KEY") as info:
        _fetch(wire, tmp_path, devto_api_key=SecretStr(KEY))
    assert exit_code_for(info.value) == 2 and KEY not in str(info.value)


@pytest.mark.parametrize("url", ["http://[::1", "http://dev.to:port/api"])
def test_an_unparsable_devto_base_url_is_a_config_error(wire: Wire, tmp_path: Path, url: str) -> None:
    """A DEVTO_BASE_URL httpx cannot parse is exit 2 naming the setting, not an internal error."""
    with pytest.raises(ConfigError, match="DEVTO_BASE_URL") as info:
        _fetch(wire, tmp_path, devto_base_url=url)
    assert exit_code_for(info.value) == 2


def test_no_account_configured_is_a_config_error(wire: Wire, tmp_path: Path) -> None:
    """Without DEVTO_USERNAME or DEVTO_API_KEY nothing is requested; the message names both ways out."""
    with pytest.raises(ConfigError, match="DEVTO_USERNAME") as info:
        _fetch(wire, tmp_path, devto_username=None)
    assert "--source FILE" in str(info.value) and exit_code_for(info.value) == 2


def test_an_article_listing_that_is_not_json_is_source_unavailable(wire: Wire,
                                                                   tmp_path: Path) -> None:
    """Without a usable listing nothing can be trusted: exit 3."""
    wire.on("GET", "/api/articles", httpx.Response(200, text="<html>maintenance</html>"))
    with pytest.raises(SourceUnavailable, match="not a JSON list"):
        _fetch(wire, tmp_path)


def test_invalid_json_comments_reject_that_article_only(wire: Wire, tmp_path: Path) -> None:
    """One article's garbage comments are a rejection; the other article's comments go through."""
    wire.on("GET", "/api/articles", httpx.Response(200, json=[_article(1), _article(2)]))
    wire.on("GET", "/api/comments", httpx.Response(200, text="{oops"), params={"a_id": "1"})
    wire.on("GET", "/api/comments", httpx.Response(200, json=[_comment("ok2")]), params={"a_id": "2"})
    result = _fetch(wire, tmp_path)
    assert [c.id for c in result.comments] == ["ok2"]
    assert [r.item for r in result.rejected] == ["article 1"] and "invalid JSON" in result.rejected[0].message
    assert result.fetched_article_ids == {2}


def test_comments_nested_past_the_recursion_limit_reject_that_article_only(wire: Wire,
                                                                          tmp_path: Path) -> None:
    """A thread too deep for the JSON decoder is a rejection of its article, not a crash."""
    wire.on("GET", "/api/articles", httpx.Response(200, json=[_article(1), _article(2)]))
    wire.on("GET", "/api/comments", httpx.Response(200, text="[" * 100_000), params={"a_id": "1"})
    wire.on("GET", "/api/comments", httpx.Response(200, json=[_comment("ok2")]), params={"a_id": "2"})
    result = _fetch(wire, tmp_path)
    assert [c.id for c in result.comments] == ["ok2"] and [r.item for r in result.rejected] == ["article 1"]


def test_a_listing_nested_past_the_recursion_limit_is_source_unavailable(wire: Wire,
                                                                         tmp_path: Path) -> None:
    """An article listing too deep for the JSON decoder stops with exit 3, not a crash."""
    wire.on("GET", "/api/articles", httpx.Response(200, text="[" * 100_000))
    with pytest.raises(SourceUnavailable, match="not a JSON list"):
        _fetch(wire, tmp_path)


def test_a_malformed_article_in_the_listing_is_rejected_the_rest_kept(wire: Wire,
                                                                      tmp_path: Path) -> None:
    """An article without an id is one rejection, named by its page position."""
    wire.on("GET", "/api/articles", httpx.Response(200, json=[{"title": "x"}, _article(2, 0)]))
    result = _fetch(wire, tmp_path)
    assert [a.id for a in result.articles] == [2]
    assert result.rejected[0].item == "article #1 of page 1"


def test_comments_404_rejects_that_article(wire: Wire, tmp_path: Path) -> None:
    """An article deleted between listing and fetch is a rejection, not a crash, and stays unfetched."""
    wire.on("GET", "/api/articles", httpx.Response(200, json=[_article(1)]))
    wire.on("GET", "/api/comments", httpx.Response(404, json={"error": "not found"}))
    result = _fetch(wire, tmp_path)
    assert result.fetched_article_ids == set() and "HTTP 404" in result.rejected[0].message


def test_redirects_are_not_followed(wire: Wire, tmp_path: Path) -> None:
    """A redirect could carry the api-key header to another host, so it is an error instead."""
    wire.on("GET", "/api/articles/me/published",
            httpx.Response(302, headers={"Location": "https://evil.example/steal"}))
    with pytest.raises(SourceUnavailable, match="HTTP 302"):
        _fetch(wire, tmp_path, devto_api_key=SecretStr(KEY))
    assert [r.url.host for r in wire.requests] == ["dev.to"]


def test_importing_the_source_package_does_not_import_httpx() -> None:
    """httpx is imported only when a dev.to client is built, so `--source FILE` runs never pay for it."""
    code = "import sys, watcher.source; print('httpx' in sys.modules)"
    repo = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo)
    assert out.stdout.strip() == "False"
